"""The launcher registry (docs/ARCHITECTURE.md, "Launcher"): every way a run's cells are started, by name,
each registered by its own folder (harness/launchers/<name>/). The one sweep path
(harness/experiment/dispatch.py) asks the registry for the launcher of a request, by name or by what the
request's environment and sweep file say, and asks the launcher everything else: where cells go, how they
start, what wraps the run. Generic: it knows no launcher and no backend."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.contracts.cell import CellSpec
from harness.contracts.placement import Placement
from harness.core.errors import UserError
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
    --master-port, --join-timeout, --secret-file), None where not given."""
    title: str = ""
    """What the run is, for messages and leases (`ddlbench sweep NAME -> DIR`)."""


@dataclass(frozen=True)
class Network:
    """One network a launcher runs every cell of a sweep on (the testbed's profiles)."""

    label: str
    """The rows' `network`."""
    rate_mbit: float | None = None
    """Its link rate, Mbit/s, when the launcher sets it."""


LaunchCell = Callable[[CellSpec, Path, Placement | None], Path]
"""Start and supervise one cell: (cell, cell_dir, placement) -> rank 0's result.json, or CellFailed
(harness/procs/supervisor.watch decides the outcome); every process it started has ended when it returns."""


@dataclass(frozen=True)
class Launcher:
    """One launcher as a run uses it, made for this request by its entry. The first four fields are what every
    launcher gives; the rest default to what one box needs (no facts, one host, this box's zygote, nothing
    around the run, the sweep's own network), and `run_module` is a capability only some launchers have."""

    name: str
    """Its registered name."""
    launch: LaunchCell
    """Start and supervise one cell (ddlbench's spawner, harness/spawner/, or its own processes)."""
    nodes_for: Callable[[int], int]
    """Place: the nodes a cell of N workers spans (cell.nodes)."""
    place: Callable[[CellSpec], CellSpec]
    """Check and place, before anything runs: cell -> the cell as this launcher places it (its `nodes` where
    hosts carry unequal numbers of ranks), or UserError for a cell it cannot place (dedicated server hosts
    where no host is spare)."""
    env_extra: Mapping[str, Any] = field(default_factory=dict)
    """Record: facts for the run's environment table (the allocation's hosts)."""
    hosts: int = 1
    """The hosts its cells may span (1: this box; a Slurm allocation's nodes, a job's nodes, the testbed's)."""
    warm: bool = True
    """Whether a zygote on this box starts with the run (ddlbench's own spawner starts the ranks here,
    harness/warm/spawn.py); False: the ranks start elsewhere (srun: forked by a zygote on each node,
    harness/launchers/srun/warm.py), so none is started here."""
    session: Callable[[], contextlib.AbstractContextManager[Any]] = contextlib.nullcontext
    """Entered around the run's cells, under the run's lock (the node leader's store, every node joined; the
    testbed's lease); `launch` is called only inside it."""
    networks: tuple[Network, ...] = ()
    """The networks every cell of a sweep runs on, one after the other (the testbed's profiles);
    () = the sweep's own `network`."""
    run_module: Callable[..., Path] | None = None
    """A capability of launchers whose ranks run beyond this box (srun across an allocation's nodes, the testbed
    on its emulated hosts): start a cell's ranks running another rank module than the worker (the collective
    timer, harness.rank.commbench), run_module(cell, cell_dir, placement, module) -> result.json, or CellFailed.
    None: it has no such way, and such a program runs on this box (harness/spawner/cell.launch_cell)."""


class Follows(UserError):
    """Raised by `LauncherEntry.make` on a node that does not lead a multi-node job (its node rank is not 0):
    such a node runs no cells of its own, so every command asking for a launcher there is refused in one line,
    except `ddlbench sweep`, which catches this and serves the leader's cells (`serve`) instead."""

    def __init__(self, serve: Callable[[Path, bool], int]):
        super().__init__(
            "this node does not lead the job (its node rank is not 0): it serves node 0's cells "
            "through `ddlbench sweep`, and runs nothing of its own"
        )
        self.serve = serve
        """serve(output, cold) -> exit status: start the ranks the leader gives this node for each cell, until
        the leader ends the run (0 when the sweep finished, 1 when it was ended); this node's logs go to
        `<output>.node<K>/`."""


@dataclass(frozen=True)
class LauncherEntry:
    name: str
    """Registered name."""
    description: str
    """One line: where the ranks run and how it is chosen."""
    make: Callable[[LaunchRequest], Launcher]
    """The launcher for this request (or raises Follows on a node that does not lead a multi-node job)."""
    detect: Callable[[LaunchRequest], bool] = field(default=lambda request: False)
    """Whether this request is this launcher's when none is named (the testbed: the sweep file's
    `testbed:`; nodes: a scheduler's variables; srun: SLURM_JOB_ID). Entries are asked in registration
    order (harness/launchers/choose.py); the last, local, takes what no other claims."""
    named: bool = True
    """Whether `--launcher NAME` may choose it (False: chosen by what the request says only)."""


LAUNCHERS: Registry[LauncherEntry] = Registry("launcher", "ddlbench sweep --help")


def register(entry: LauncherEntry) -> LauncherEntry:
    return LAUNCHERS.register(entry.name, entry)
