"""The recipe a backend gives the local launcher (docs/ARCHITECTURE.md, "Launcher"): how it starts the backend's ranks
differently from the default; a backend that gives none gets this type's defaults."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

from harness.contracts.backend import recipe_type


@recipe_type
@dataclass(frozen=True)
class LocalRecipe:
    """One box (harness/launchers/local/launcher.py)."""

    launcher: ClassVar[str] = "local"
    launch: Callable | None = None
    """The framework's own single-box launch program, the way its users start it (horovodrun, the deepspeed
    launch program): (cell, cell_dir, placement) -> result.json. None = ddlbench's spawner (harness/spawner/)."""
