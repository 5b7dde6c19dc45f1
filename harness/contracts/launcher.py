"""The launcher registry (docs/ARCHITECTURE.md, "Launcher"): every way a run's cells are started, by name,
each registered by its own folder (harness/launchers/<name>/). The one sweep path
(harness/experiment/run.py) asks the registry for the launcher of a request, by name or by what the
request's environment and sweep file say, and asks the launcher everything else: where cells go, how they
start, what wraps the run. Generic: it knows no launcher and no backend."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, ContextManager, Mapping

from harness.core.registry import Registry


@dataclass(frozen=True)
class LaunchRequest:
    """What a run asks a launcher for: the environment it runs in, and what the command was given."""

    environ: Mapping[str, str]
    """The process environment (a scheduler's variables: SLURM_*, PET_*, SKYPILOT_*)."""
    sweep: Any = None
    """The sweep being run (harness/experiment/sweep.py: SweepConfig; its `testbed:`, `networks:`,
    `network`, `device`), or None for a single cell."""
    flags: Mapping[str, Any] = field(default_factory=dict)
    """The command line's launcher flags (--nnodes, --node-rank, --nproc-per-node, --master-addr,
    --master-port, --join-timeout), None where not given."""
    title: str = ""
    """What the run is, for messages and leases (`ddlbench sweep NAME -> DIR`)."""


@dataclass(frozen=True)
class Network:
    """One network a launcher runs every cell of a sweep on (the testbed's profiles)."""

    label: str
    """The rows' `network`."""
    rate_mbit: float | None = None
    """Its link rate, Mbit/s, when the launcher sets it."""


@dataclass(frozen=True)
class Launcher:
    """One launcher as a run uses it, made for this request by its entry."""

    name: str
    """Its registered name."""
    launch: Callable | None
    """Start and supervise one cell: launch(cell, cell_dir, placement) -> result.json, or CellFailed
    (harness/procs/supervisor.watch decides the outcome); None = the local spawner or the backend's own."""
    nodes_for: Callable[[int], int] | None
    """Place: the nodes a cell of N workers spans (cell.nodes); None = 1."""
    env_extra: dict
    """Record: facts for the run's environment table (the allocation's hosts)."""
    check: Callable | None = None
    """Check before anything runs: check(cell) raises UserError for a cell it cannot place."""
    run_module: Callable | None = None
    """Start a cell's ranks running another rank module than the worker (the collective timer,
    harness.rank.commbench): run_module(cell, cell_dir, placement, module) -> result.json, or CellFailed;
    None = on this box (harness/launchers/local/launcher.launch_cell)."""
    warm: bool = True
    """Whether a zygote on this box starts with the run (ddlbench's own spawner starts the ranks here,
    harness/warm/spawn.py); False: the ranks start elsewhere (srun: forked by a zygote on each node,
    harness/launchers/srun/warm.py), so none is started here."""
    networks: tuple[Network, ...] = ()
    """The networks every cell of a sweep runs on, one after the other (the testbed's profiles);
    () = the sweep's own `network`."""
    place: Callable[[Any], Any] | None = None
    """cell -> the cell as this launcher places it (its `nodes` where hosts carry unequal numbers of
    ranks), before `check`."""
    session: Callable[[], ContextManager[Callable | None]] | None = None
    """Entered around the run's cells, under the run's lock: yields the per-cell launch callable (the
    node leader's store; the testbed's lease); None = `launch` as it is."""
    follow: Callable[[], int] | None = None
    """A launcher on a node that does not lead (a multi-node job's node > 0): serve the leader's cells until
    it ends and return the exit status; such a node runs no sweep of its own."""


@dataclass(frozen=True)
class LauncherEntry:
    name: str
    """Registered name."""
    description: str
    """One line: where the ranks run and how it is chosen."""
    make: Callable[[LaunchRequest], Launcher]
    """The launcher for this request."""
    detect: Callable[[LaunchRequest], bool] = field(default=lambda request: False)
    """Whether this request is this launcher's when none is named (the testbed: the sweep file's
    `testbed:`; nodes: a scheduler's variables; srun: SLURM_JOB_ID). Entries are asked in registration
    order (harness/launchers/choose.py); the last, local, takes what no other claims."""
    named: bool = True
    """Whether `--launcher NAME` may choose it (False: chosen by what the request says only)."""


LAUNCHERS: Registry[LauncherEntry] = Registry("launcher", "ddlbench sweep --help")


def register(entry: LauncherEntry) -> LauncherEntry:
    return LAUNCHERS.register(entry.name, entry)
