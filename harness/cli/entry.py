"""The `ddlbench` console script (pyproject.toml). A command that forks warm ranks on this box (`run`,
`sweep`, `advise`, without `--cold`) starts the zygote before the command line imports its commands
(torch, pandas, the harness: seconds), so that both import at once (docs/ARCHITECTURE.md, "Warm ranks");
the run's `spawn.warm_ranks` block adopts it, a cold run closes it. Then the click group of harness/cli/main.py
runs, imported by name here so that this module stays as light as what it starts first.
"""

from __future__ import annotations

import importlib
import os
import sys

from harness.warm import spawn

WARM_COMMANDS = ("run", "sweep", "advise")
"""Commands whose ranks start on this box by default (and warm unless --cold)."""


def forks_here(argv: list[str], environ) -> bool:
    """Whether the command line is one whose ranks are forked on this box: a WARM_COMMANDS command, not
    --cold, not asking for help, and not inside a Slurm allocation (whose zygotes run on its nodes)."""
    if not argv or argv[0] not in WARM_COMMANDS:
        return False
    return not ({"--cold", "-h", "--help"} & set(argv) or environ.get("SLURM_JOB_ID"))


def main() -> None:
    if forks_here(sys.argv[1:], os.environ):
        spawn.start_early()
    importlib.import_module("harness.cli.main").main()


if __name__ == "__main__":
    main()
