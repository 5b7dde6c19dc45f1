"""Shared fixtures. Multi-process tests run real worker processes (gloo over loopback)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def require(condition: bool, reason: str) -> None:
    """Skip loudly, or fail under CI (CI=true) where a required part must be present."""
    if condition:
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"required for CI but missing: {reason}")
    pytest.skip(f"NOT RUN: {reason}")


@pytest.fixture
def run_dir(tmp_path) -> Path:
    return tmp_path / "run"
