"""Small detectable-step tables for the history tests that go through the CLI (harness/history/blind.py:
160 simulated series per table in use, 24 here, so a test's page or compare takes seconds); test_blind.py's
acceptance test asks for the real count itself."""

from __future__ import annotations

import pytest

from harness.history import blind


@pytest.fixture(autouse=True)
def small_blind_tables(monkeypatch):
    monkeypatch.setattr(blind, "SERIES", 24)
