"""Small detectable-step tables for the page's browser test (harness/history/blind.py simulates 160 series per
table in use; 24 here): this test is of the page in a browser, not of the simulation's accuracy, which
tests/unit/history/test_blind.py checks at the real count. Without it the page's first build simulated about a
minute of tables on a fresh machine."""

from __future__ import annotations

import pytest

from harness.history import blind


@pytest.fixture(autouse=True)
def small_blind_tables(monkeypatch):
    monkeypatch.setattr(blind, "SERIES", 24)
