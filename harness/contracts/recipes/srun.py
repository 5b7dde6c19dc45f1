"""The recipe a backend gives the srun launcher, and the types it plans with (docs/ARCHITECTURE.md, "Launcher" and
"Launching"): the allocation, a job step as data (`Step`), and what a backend may ask of one cell in an
allocation (`SrunContext`: its nodes, its srun command lines, its variables). Types only: each backend turns an
`SrunContext` into its own `Step`s (its `SrunRecipe.plan`); harness/launchers/srun/context.py places the ranks
and builds the context, harness/launchers/srun/launcher.py runs the steps.

Nothing here imports the cell or the backends, so that backends build on it without a cycle, and nothing
imports the srun launcher's folder: a backend builds its recipe from here (docs/ARCHITECTURE.md, "Rules" 6).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Protocol

from harness.contracts.backend import recipe_type

SHIM_MODULE = "harness.rank.srun_task"
"""The per-task shim that gives a task its framework's variables (`SrunRecipe.task_envs`), run as a process:
harness/rank/srun_task.py, which loads the backends first."""


# ------------------------------------------------------------------------------------ allocation


@dataclass(frozen=True)
class Allocation:
    job_id: str
    """SLURM_JOB_ID of the allocation this process runs in."""
    nodes: tuple[str, ...]
    """Node names, in Slurm's order (the batch script runs on the first)."""
    tasks_per_node: int
    """Workers per node the allocation was sized for (--ntasks-per-node)."""
    cpus_per_node: tuple[int, ...]
    """CPUs allocated on each node (SLURM_JOB_CPUS_PER_NODE)."""
    here: str = ""
    """The allocation's node this process runs on: SLURMD_NODENAME in a batch script; under salloc
    the node whose address is this host's, if any; else ""."""


# ------------------------------------------------------------------------------------ steps


@dataclass(frozen=True)
class Step:
    role: str
    """workers | servers | scheduler | horovodrun."""
    argv: tuple[str, ...]
    """The whole command (srun ... or horovodrun ...)."""
    hosts: tuple[str, ...] = ()
    """Host file: one node name per task, in rank order (srun --distribution=arbitrary)."""
    env: tuple[tuple[str, str], ...] = ()
    """Variables set for this step on top of the cleaned environment; a mapping given here is kept as its
    sorted (name, str(value)) pairs (steps are compared in tests)."""
    main: bool = True
    """The cell is done when the main steps end; the others (scheduler, servers) are then stopped."""

    def __post_init__(self) -> None:
        if isinstance(self.env, Mapping):
            object.__setattr__(self, "env", tuple(sorted((k, str(v)) for k, v in self.env.items())))


class SrunContext(Protocol):
    """Everything a backend needs to plan one cell's steps in an allocation (made by the srun launcher:
    harness/launchers/srun/context.py)."""

    cell: Any
    """The resolved CellSpec."""
    alloc: Allocation
    """The allocation the steps run in."""
    cell_dir: Path
    """Where rank logs and result.json go."""
    master_addr: str
    """Rendezvous address (rank 0's node, as Slurm reaches it)."""
    port: int
    """Rendezvous port of this cell."""
    command: tuple[str, ...]
    """Each rank's argv (the worker, or a probe in tests)."""
    variant: str | None
    """A backend's launch variant (e.g. Horovod's `horovodrun` instead of srun tasks); None = default."""
    rendezvous: tuple[str, int] | None
    """A backend-run rendezvous service (Horovod's gloo HTTP server), once started (a session yields the
    context with it: `dataclasses.replace(ctx, rendezvous=...)`)."""
    extra_env: dict
    """Variables every task gets beyond the common ones (backend and network choices)."""
    addr_of: Callable[[str], str]
    """A node's name -> the address the allocation's nodes reach it at; a service a backend runs on this node
    announces this address."""

    @property
    def workers(self) -> list[str]:
        """The node of each worker, in rank order."""

    @property
    def servers(self) -> list[str]:
        """The node of each parameter server."""

    @property
    def name(self) -> str:
        """The steps' job name."""

    @property
    def out(self) -> str:
        """The workers' log pattern (srun --output)."""

    @property
    def cpus(self) -> int:
        """CPUs per worker task."""

    def common_env(self) -> dict[str, str]:
        """The variables every task of the cell gets."""

    def srun(self, hosts: list[str], cpus: int, name: str, out: str, overlap: bool = False) -> list[str]:
        """srun and its options for one step whose task i runs on hosts[i]."""

    def shim(self, style: str) -> tuple[str, ...]:
        """`python -m harness.rank.srun_task STYLE`: put before `--` and the command."""

    def all_ranks_step(self, prefix: tuple[str, ...] = ()) -> list[Step]:
        """The plain plan: one step whose tasks are every rank, each running `prefix + command`."""


# ------------------------------------------------------------------------------------ the recipe


@recipe_type
@dataclass(frozen=True)
class SrunRecipe:
    """Job steps inside a Slurm allocation (harness/launchers/srun/launcher.py)."""

    launcher: ClassVar[str] = "srun"
    plan: Callable[[Any], list] = lambda ctx: ctx.all_ranks_step()
    """(SrunContext) -> the job steps that run one cell (pure); by default one step of every rank."""
    session: Callable[[Any], Any] = contextlib.nullcontext
    """(SrunContext) -> a context manager around the steps, yielding the context to plan with (Horovod
    starts its rendezvous server here)."""
    variant: Callable[[Mapping[str, str]], str | None] = lambda environ: None
    """(environment) -> the launch variant the user chose (None = the backend's default)."""
    task_envs: dict = field(default_factory=dict)
    """Shim styles: style -> (environ) -> {variable: value, or None to unset}, run by
    `python -m harness.rank.srun_task STYLE -- ARGV` in front of each task."""
