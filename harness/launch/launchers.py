"""Choosing a sweep's launcher by name (`ddlbench sweep --launcher`), over the registry of
harness/launch/base.py. Importing this module registers the launchers chosen by name:

    local   every rank on this box (harness/launch/local.py)
    srun    a job step per cell inside a Slurm allocation (harness/launch/srun.py)

The testbed's launcher (harness/testbed/sweep.py) is chosen by a sweep file's `testbed:`, the
multi-node one (harness/launch/nodes.py) by the scheduler's variables; they register themselves too.
"""

from __future__ import annotations

import os
from typing import Mapping

import harness.launch.local  # noqa: F401  (registers `local`)
import harness.launch.srun  # noqa: F401  (registers `srun`)
from harness.errors import UserError
from harness.launch.base import LAUNCHERS, Launcher

SweepLauncher = Launcher
"""Its older name."""


def by_name() -> tuple[str, ...]:
    """The launchers `--launcher` can name."""
    return tuple(name for name, entry in LAUNCHERS.items() if entry.make is not None)


def choose_launcher(name: str | None = None, environ: Mapping[str, str] | None = None) -> Launcher:
    """`ddlbench sweep --launcher`: the one whose environment this is (srun inside an allocation), else
    local."""
    env = os.environ if environ is None else environ
    if name is None:
        name = next((n for n, e in LAUNCHERS.items() if e.make and e.detect(env)), "local")
    if name not in by_name():
        raise UserError(f"unknown launcher {name!r}; available: {', '.join(by_name())}")
    return LAUNCHERS.get(name).make(env)
