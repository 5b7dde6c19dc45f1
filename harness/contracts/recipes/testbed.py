"""The recipe a backend gives the testbed launcher (docs/ARCHITECTURE.md, "Launcher"): how it starts the backend's ranks
differently from the default; a backend that gives none gets this type's defaults."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

from harness.contracts.backend import recipe_type


@recipe_type
@dataclass(frozen=True)
class PlacedRecipe:
    """Ranks ddlbench spawns on placed hosts: the emulated testbed (harness/launchers/testbed/launcher.py)."""

    launcher: ClassVar[str] = "testbed"
    session: Callable[[Any, Any], Any] = lambda cell, placement: contextlib.nullcontext(placement)
    """(cell, Placement) -> a context manager around the cell, yielding the Placement to launch with
    (Horovod starts its rendezvous server on rank 0's host and adds horovodrun's slot variables)."""
