"""Where run directories go: the results root and a new run's directory, without reading a table (so a command's
options can name them without importing pandas; docs/ARCHITECTURE.md, "Commands")."""

from __future__ import annotations

import datetime
from pathlib import Path

RESULTS_ROOT = Path("results")
"""Where run directories go unless told (relative to the working directory), and where a run id is looked up."""


def new_run_id(name: str = "run") -> str:
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%d-%H%M%S")
    return f"{stamp}-{name}"


def default_run_dir(name: str) -> Path:
    """The run directory of a command given no --output: results/<UTC time>-<name> (the one place it is made)."""
    return RESULTS_ROOT / new_run_id(name)
