"""The launchers a sweep can run its cells with, by name (`ddlbench sweep --launcher`).

    local   every rank on this box (harness/launch/local.py; a backend's own single-box launcher)
    srun    a job step per cell inside a Slurm allocation (harness/launch/srun.py)

The emulated testbed's launcher is chosen by `ddlbench testbed sweep` (harness/testbed/sweep.py).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Callable, Mapping

from harness.errors import UserError
from harness.launch.srun import allocation_from_env, launch_cell_srun
from harness.launch.srun_plan import check_one_box, server_hosts_in

LAUNCHERS = ("local", "srun")


@dataclass(frozen=True)
class SweepLauncher:
    name: str
    """local | srun."""
    launch: Callable | None
    """launch_cell-compatible function; None = the default local spawner."""
    nodes_for: Callable[[int], int] | None
    """Nodes a cell of N workers spans (cell.nodes); None = 1."""
    env_extra: dict
    """Facts for the environment table (hosts of the allocation)."""
    check: Callable | None = None
    """check(cell): UserError, before anything runs, for a cell this launcher cannot place."""


def choose_launcher(name: str | None = None, environ: Mapping[str, str] | None = None) -> SweepLauncher:
    """`ddlbench sweep --launcher`: srun inside an allocation (SLURM_JOB_ID set), local otherwise."""
    env = os.environ if environ is None else environ
    name = name or ("srun" if env.get("SLURM_JOB_ID") else "local")
    if name not in LAUNCHERS:
        raise UserError(f"unknown launcher {name!r}; available: {', '.join(LAUNCHERS)}")
    if name == "local":
        return SweepLauncher("local", None, None, {}, check_one_box)
    alloc = allocation_from_env(env)
    return SweepLauncher("srun", launch_cell_srun, alloc.nodes_for, {"hosts": ",".join(alloc.nodes)},
                         lambda cell: server_hosts_in(cell, alloc))

