"""The recipe a backend gives the node-list launcher (docs/ARCHITECTURE.md, "Launcher"): how it starts the backend's
ranks differently from the default; a backend that gives none gets this type's defaults."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from harness.contracts.backend import recipe_type


@recipe_type
@dataclass(frozen=True)
class NodesRecipe:
    """`ddlbench sweep` run on every node (harness/launchers/nodes/launcher.py)."""

    launcher: ClassVar[str] = "nodes"
    refuse: str | None = None
    """Why this launcher cannot start the backend's ranks (one line with the fix), else None."""
