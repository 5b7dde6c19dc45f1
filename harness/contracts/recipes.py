"""Launch recipes (docs/ARCHITECTURE.md, "Launcher" and "Backend"): how each backend is started by each
launcher, given by the backend and asked by the launcher, so that neither names the other.

A backend registers one `BackendLaunch`: the variables every rank needs whoever starts it, how its own
framework launcher names ranks (horovodrun's HOROVOD_*), and one recipe per launcher that starts it
differently from the default. A recipe's type is the launcher's, defined in its folder
(harness/launchers/<name>/recipe.py, registered with `recipe_type`): a launcher asks
`recipe(cell.backend, ITS_TYPE)` and gets the backend's or the type's default. A backend that needs nothing
special from a launcher gives nothing.

The backends are this registry's plugins: their package (`PLUGINS`) is imported by name on first use,
so the launch layer imports no backend module and still never asks an empty registry.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Callable, Mapping, TypeVar


PLUGINS = "harness.backends"
"""The package whose import registers every backend (each calls `register`)."""


RECIPE_TYPES: list[type] = []
"""Every launcher's recipe type, registered by its folder's recipe.py (`recipe_type`)."""


def recipe_type(cls: type) -> type:
    """Class decorator: a launcher's recipe type (a frozen dataclass whose class attribute `launcher` names
    it; every field has a default, which is what a backend that gives no recipe of this type gets)."""
    if any(t.launcher == cls.launcher for t in RECIPE_TYPES):
        raise ValueError(f"launcher {cls.launcher!r} registered a recipe type twice")
    RECIPE_TYPES.append(cls)
    return cls


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
    """The DistEnv a framework's own launcher gave this process, else None (launchers/identity.py)."""
    for name in sorted(_backends()):
        found = _backends()[name].identity(environ)
        if found is not None:
            return found
    return None
