"""The recipe a backend gives batch scripts (docs/ARCHITECTURE.md, "Launcher"): how it starts the backend's ranks
differently from the default; a backend that gives none gets this type's defaults."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar

from harness.contracts.recipes import recipe_type


@dataclass(frozen=True)
class SbatchStyle:
    """One way a batch script starts the workers (`SbatchSpec.launch`)."""

    render: Callable[[Any], str]
    """(SbatchSpec) -> the script's launch block, after the rendezvous lines."""
    extra_nodes: Callable[[Any], int] = lambda spec: 0
    """(SbatchSpec) -> nodes the job needs beyond the worker nodes (e.g. dedicated server nodes)."""


@recipe_type
@dataclass(frozen=True)
class SbatchRecipe:
    """Batch scripts (harness/launchers/sbatch/script.py, sweep_jobs.py)."""

    launcher: ClassVar[str] = "sbatch"
    styles: dict = field(default_factory=dict)
    """Launch styles this backend renders: style -> SbatchStyle."""
    examples: tuple = ()
    """Example scripts (slurm/*.sbatch): dicts of name, sweep, notes and SbatchSpec fields."""
