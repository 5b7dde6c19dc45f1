"""Launch recipes (docs/ARCHITECTURE.md, "Launcher" and "Backend"): how each backend is started by each
launcher, given by the backend and asked by the launcher, so that neither names the other.

A backend registers one `BackendLaunch`: the variables every rank needs whoever starts it, how its own
framework launcher names ranks (horovodrun's HOROVOD_*), and one recipe per launcher that starts it
differently from the default. A recipe's type is the launcher's, defined in its folder
(harness/launchers/<name>/recipe.py, registered with `recipe_type`): a launcher asks
`recipe(cell.backend, ITS_TYPE)` (harness/contracts/backend.py, which holds the backends' registry) and
gets the backend's or the type's default. A backend that needs nothing special from a launcher gives
nothing. This module only defines the types; it asks no registry.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping


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
    """(environment) -> RankIdentity when a rank was started by the framework's own launch program, else None."""
    recipes: tuple = ()
    """At most one recipe per type in RECIPE_TYPES; a type left out means its default."""

    def __post_init__(self):
        kinds = [type(r) for r in self.recipes]
        if any(k not in RECIPE_TYPES for k in kinds) or len(set(kinds)) != len(kinds):
            raise ValueError(f"recipes must be distinct instances of {[t.__name__ for t in RECIPE_TYPES]}")
