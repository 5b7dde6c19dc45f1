"""The launcher registry (docs/ARCHITECTURE.md, "Launcher"): every way a sweep's cells are started,
by name, each registered by its own module (launch/local.py, launch/srun.py, launch/nodes.py,
testbed/sweep.py). Generic: it knows no launcher and no backend."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Mapping

from harness.registry import Registry


@dataclass(frozen=True)
class Launcher:
    """One launcher as a sweep uses it, made for this environment by its entry."""

    name: str
    """Its registered name."""
    launch: Callable | None
    """Start and supervise one cell: launch(cell, cell_dir, placement) -> result.json, or CellFailed
    (launch/watch.watch supervises it and decides the outcome); None = the local spawner or the backend's own."""
    nodes_for: Callable[[int], int] | None
    """Place: the nodes a cell of N workers spans (cell.nodes); None = 1."""
    env_extra: dict
    """Record: facts for the run's environment table (the allocation's hosts)."""
    check: Callable | None = None
    """Check before anything runs: check(cell) raises UserError for a cell it cannot place."""
    run_module: Callable | None = None
    """Start a cell's ranks running another rank module than the worker (the collective timer,
    harness.commbench): run_module(cell, cell_dir, placement, module) -> result.json, or CellFailed;
    None = on this box (launch/local.launch_cell)."""
    warm: bool = True
    """Whether a zygote on this box starts with the run (ddlbench's own spawner starts the ranks here,
    launch/spawn.py); False: the ranks start elsewhere (srun: forked by a zygote on each node,
    launch/srun_warm.py), so none is started here."""


@dataclass(frozen=True)
class LauncherEntry:
    name: str
    """Registered name."""
    description: str
    """One line: where the ranks run and how it is chosen."""
    make: Callable[[Mapping[str, str]], Launcher] | None = None
    """The launcher for this environment (`ddlbench sweep --launcher NAME`); None = not chosen by name
    (the testbed's: by the sweep file's `testbed:`; the multi-node one: by the scheduler's variables)."""
    detect: Callable[[Mapping[str, str]], bool] = field(default=lambda environ: False)
    """Whether this environment is this launcher's, when no --launcher is given (srun: SLURM_JOB_ID)."""


LAUNCHERS: Registry[LauncherEntry] = Registry("launcher", "ddlbench sweep --help")


def register(entry: LauncherEntry) -> LauncherEntry:
    return LAUNCHERS.register(entry.name, entry)
