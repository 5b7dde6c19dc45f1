"""Launch recipes (docs/ARCHITECTURE.md, "Launcher" and "Backend"): how each backend is started by each
launcher, given by the backend and asked by the launcher, so that neither names the other.

A backend registers one `BackendLaunch`: the variables every rank needs whoever starts it, how its own
framework launcher names ranks (horovodrun's HOROVOD_*), and one recipe per launcher that starts it
differently from the default. A recipe's type is the launcher's (`LocalRecipe`, `SrunRecipe`,
`PlacedRecipe`, `NodesRecipe`, `SbatchRecipe`): a launcher asks `recipe(cell.backend, ITS_TYPE)` and gets
the backend's or the type's default. Adding a launcher = its module, its recipe type here and the
registry line; a backend that needs nothing special from it gives nothing.

The backends are this registry's plugins: their package (`PLUGINS`) is imported by name on first use,
so the launch layer imports no backend module and still never asks an empty registry.
"""

from __future__ import annotations

import contextlib
import importlib
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar, Mapping, TypeVar

from harness.launch.srun_plan import all_ranks_step

PLUGINS = "harness.backends"
"""The package whose import registers every backend (each calls `register`)."""


@dataclass(frozen=True)
class LocalRecipe:
    """One box (harness/launch/local.py)."""

    launcher: ClassVar[str] = "local"
    launch: Callable | None = None
    """The framework's own single-box launcher, the way its users start it (horovodrun, the deepspeed
    launcher): (cell, cell_dir, placement) -> result.json. None = ddlbench's local spawner."""


@dataclass(frozen=True)
class SrunRecipe:
    """Job steps inside a Slurm allocation (harness/launch/srun.py)."""

    launcher: ClassVar[str] = "srun"
    plan: Callable[[Any], list] = all_ranks_step
    """(SrunContext) -> the job steps that run one cell (pure)."""
    session: Callable[[Any], Any] = contextlib.nullcontext
    """(SrunContext) -> a context manager around the steps, yielding the context to plan with (Horovod
    starts its rendezvous server here)."""
    variant: Callable[[Mapping[str, str]], str | None] = lambda environ: None
    """(environment) -> the launch variant the user chose (None = the backend's default)."""
    task_envs: dict = field(default_factory=dict)
    """Shim styles: style -> (environ) -> {variable: value, or None to unset}, run by
    `python -m harness.launch.srun_task STYLE -- ARGV` in front of each task."""


@dataclass(frozen=True)
class PlacedRecipe:
    """Ranks ddlbench spawns on placed hosts: the emulated testbed (harness/testbed/sweep.py)."""

    launcher: ClassVar[str] = "testbed"
    session: Callable[[Any, Any], Any] = lambda cell, placement: contextlib.nullcontext(placement)
    """(cell, Placement) -> a context manager around the cell, yielding the Placement to launch with
    (Horovod starts its rendezvous server on rank 0's host and adds horovodrun's slot variables)."""


@dataclass(frozen=True)
class NodesRecipe:
    """`ddlbench sweep` run on every node (harness/launch/nodes.py)."""

    launcher: ClassVar[str] = "nodes"
    refuse: str | None = None
    """Why this launcher cannot start the backend's ranks (one line with the fix), else None."""


@dataclass(frozen=True)
class SbatchStyle:
    """One way a batch script starts the workers (`SbatchSpec.launch`)."""

    render: Callable[[Any], str]
    """(SbatchSpec) -> the script's launch block, after the rendezvous lines."""
    extra_nodes: Callable[[Any], int] = lambda spec: 0
    """(SbatchSpec) -> nodes the job needs beyond the worker nodes (e.g. dedicated server nodes)."""


@dataclass(frozen=True)
class SbatchRecipe:
    """Batch scripts (harness/launch/sbatch.py, sweep_jobs.py)."""

    launcher: ClassVar[str] = "sbatch"
    styles: dict = field(default_factory=dict)
    """Launch styles this backend renders: style -> SbatchStyle."""
    examples: tuple = ()
    """Example scripts (slurm/*.sbatch): dicts of name, sweep, notes and SbatchSpec fields."""


RECIPE_TYPES = (LocalRecipe, SrunRecipe, PlacedRecipe, NodesRecipe, SbatchRecipe)


@dataclass(frozen=True)
class BackendLaunch:
    """What one backend gives the launchers."""

    rank_env: Callable[[Any], dict] = lambda cell: {}
    """(cell) -> variables every rank needs whatever starts it (e.g. DeepSpeed's compiled-ops folder)."""
    identity: Callable[[Mapping[str, str]], Any] = lambda environ: None
    """(environment) -> DistEnv when a rank was started by the framework's own launcher, else None."""
    recipes: tuple = ()
    """At most one recipe per type in RECIPE_TYPES; a type left out means its default."""

    def __post_init__(self):
        kinds = [type(r) for r in self.recipes]
        if any(k not in RECIPE_TYPES for k in kinds) or len(set(kinds)) != len(kinds):
            raise ValueError(f"recipes must be distinct instances of {[t.__name__ for t in RECIPE_TYPES]}")


_BY_BACKEND: dict[str, BackendLaunch] = {}
R = TypeVar("R")


def register(backend: str, launch: BackendLaunch) -> None:
    if backend in _BY_BACKEND:
        raise ValueError(f"backend {backend!r} registered its launch recipes twice")
    _BY_BACKEND[backend] = launch


def _backends() -> dict[str, BackendLaunch]:
    if not _BY_BACKEND:
        importlib.import_module(PLUGINS)
    return _BY_BACKEND


def backend_launch(backend: str) -> BackendLaunch:
    known = _backends()
    if backend not in known:
        raise KeyError(f"backend {backend!r} registered no launch recipes (known: {', '.join(sorted(known))})")
    return known[backend]


def recipe(backend: str, kind: type[R]) -> R:
    """The backend's recipe for the launcher whose type is `kind`, else that type's default."""
    return next((r for r in backend_launch(backend).recipes if isinstance(r, kind)), None) or kind()


def every(kind: type[R]) -> list[tuple[str, R]]:
    """(backend, its recipe of `kind`) for every backend, in name order."""
    return [(name, recipe(name, kind)) for name in sorted(_backends())]


def rank_env(cell) -> dict:
    return dict(backend_launch(cell.backend).rank_env(cell))


def identity(environ: Mapping[str, str]):
    """The DistEnv a framework's own launcher gave this process, else None (launch/env.py)."""
    for name in sorted(_backends()):
        found = _backends()[name].identity(environ)
        if found is not None:
            return found
    return None
