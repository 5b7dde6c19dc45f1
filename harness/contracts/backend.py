"""The backend contract and its registry (docs/ARCHITECTURE.md, "Backend" and "Plugins"): one BackendEntry
per backend, and BACKENDS, the one registry every layer asks what a backend is, provides and gives the
launchers (its BackendLaunch: one recipe per launcher that starts it differently, each of the type that
launcher declares in harness/contracts/recipes/, registered with `recipe_type`).

The registry is filled by one explicit load, `harness.backends.load()`, which the layers above the
backends call (the rank's entry points, the one sweep path, the commands that ask); the launchers and the
schemes, below or beside the backends, only ask. Nothing here imports a backend, by name or otherwise: a
question asked before the load is a RuntimeError that says so.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from harness.contracts.capabilities import check_words
from harness.core.registry import Registry

RECIPE_TYPES: list[type] = []
"""Every launcher's recipe type (harness/contracts/recipes/<launcher>.py), registered by `recipe_type`."""


def recipe_type(cls: type) -> type:
    """Class decorator: a launcher's recipe type (a frozen dataclass whose class attribute `launcher` names
    it; every field has a default, which is what a backend that gives no recipe of this type gets)."""
    if any(t.launcher == cls.launcher for t in RECIPE_TYPES):
        raise ValueError(f"launcher {cls.launcher!r} registered a recipe type twice")
    RECIPE_TYPES.append(cls)
    return cls


@dataclass(frozen=True)
class BackendLaunch:
    """What one backend gives the launchers: the variables every rank needs whoever starts it, how its own
    framework launcher names ranks (horovodrun's HOROVOD_*), and one recipe per launcher that starts it
    differently from the default (a backend that needs nothing special from a launcher gives nothing)."""

    rank_env: Callable[[Any], dict] = lambda cell: {}
    """(cell) -> variables every rank needs whatever starts it (e.g. DeepSpeed's compiled-ops folder)."""
    identity: Callable[[Mapping[str, str]], Any] = lambda environ: None
    """(environment) -> RankIdentity when a rank was started by the framework's own launch program, else None."""
    recipes: tuple = ()
    """At most one recipe per type in RECIPE_TYPES; a type left out means its default."""

    def __post_init__(self):
        kinds = [type(r) for r in self.recipes]
        if any(k not in RECIPE_TYPES for k in kinds) or len(set(kinds)) != len(kinds):
            raise ValueError(f"recipes must be distinct instances of {[t.__name__ for t in RECIPE_TYPES]}")


@dataclass(frozen=True)
class BackendEntry:
    """Everything about one backend (docs/ARCHITECTURE.md, "Backend"): its transport, its server loop,
    and how the launchers start it (`launch`: one recipe per launcher, harness/contracts/recipes/).
    Generic code asks these fields and the recipes, and never tests a backend's name."""

    name: str
    """Registered name: torch | horovod | deepspeed | byteps."""
    description: str
    """One line for `ddlbench list`."""
    start: Callable[..., Any]
    """(cell, me: RankIdentity, device) -> Transport (worker) ; servers are run by `serve`."""
    serve: Callable[..., None] | None = None
    """(cell, me: RankIdentity) -> None: the parameter-server loop, for backends that have one."""
    available: Callable[[], str | None] = lambda: None
    """Returns None when usable here, else a one-line reason with the fix."""
    device_check: Callable[[str], str | None] = lambda device: None
    """(device: cpu | cuda) -> None when this backend can run cells there, else a one-line reason (e.g.
    Horovod built without NCCL cannot reduce CUDA tensors on the GPU)."""
    provides: frozenset = frozenset()
    """What its transport or framework offers schemes (harness/contracts/capabilities.py): every scheme that
    needs no more runs on it."""
    library: str | None = None
    """The distribution whose installed version the environment table records in the column named after the
    backend, compared by the gate for this backend's cells (None: nothing beyond torch)."""
    versions: Callable[[], dict] = field(default=lambda: {})
    """Library versions, recorded in the environment table: {column: version}, the backend's own library
    under the backend's name (compared by the gate for its cells only), anything else beside it."""
    launch: BackendLaunch = field(default_factory=BackendLaunch)
    """How the launchers start it: the variables every rank needs, how its own launch program names ranks,
    and its recipe for each launcher that starts it differently from the default."""

    def __post_init__(self):
        object.__setattr__(self, "provides", check_words(self.provides, f"backend {self.name!r}"))


BACKENDS: Registry[BackendEntry] = Registry("backend")
"""Every backend, in registration order (torch first): filled by harness.backends.load()."""
R = TypeVar("R")


def register(entry: BackendEntry) -> BackendEntry:
    """Add a backend to BACKENDS (harness.backends.load() calls it for each backend package's ENTRY)."""
    return BACKENDS.register(entry.name, entry)


def loaded() -> Registry[BackendEntry]:
    """BACKENDS, once the backends are loaded; else a RuntimeError naming the missing load."""
    if not BACKENDS.names():
        raise RuntimeError(
            "no backend is registered: this process's entry point calls harness.backends.load() "
            'before asking (docs/ARCHITECTURE.md, "Plugins")'
        )
    return BACKENDS


def providers(needs: frozenset) -> tuple[str, ...]:
    """The backends that provide everything in `needs` (harness/contracts/capabilities.py), in registration
    order; a scheme that needs nothing (it communicates nothing) runs on the first backend only: there is
    nothing to choose between."""
    names = loaded().names()
    if not needs:
        return names[:1]
    return tuple(name for name in names if needs <= BACKENDS.get(name).provides)


def backend_launch(backend: str) -> BackendLaunch:
    """What the backend `backend` gives the launchers (a UserError listing the known ones when unknown)."""
    return loaded().get(backend).launch


def recipe(backend: str, kind: type[R]) -> R:
    """The backend's recipe for the launcher whose type is `kind`, else that type's default."""
    return next((r for r in backend_launch(backend).recipes if isinstance(r, kind)), None) or kind()


def every(kind: type[R]) -> list[tuple[str, R]]:
    """(backend, its recipe of `kind`) for every backend, in name order."""
    return [(name, recipe(name, kind)) for name in sorted(loaded().names())]


def rank_env(cell) -> dict:
    """The variables every rank of `cell` needs, whoever starts it (`BackendLaunch.rank_env`)."""
    return dict(backend_launch(cell.backend).rank_env(cell))


def identity(environ: Mapping[str, str]):
    """The RankIdentity a framework's own launch program gave this process, else None (launchers/identity.py)."""
    for name in sorted(loaded().names()):
        found = BACKENDS.get(name).launch.identity(environ)
        if found is not None:
            return found
    return None
