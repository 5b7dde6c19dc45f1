"""The recipe a backend gives the srun launcher (docs/ARCHITECTURE.md, "Launcher"): how it starts the backend's ranks
differently from the default; a backend that gives none gets this type's defaults."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar, Mapping

from harness.launchers.srun.steps import all_ranks_step

from harness.contracts.recipes import recipe_type


@recipe_type
@dataclass(frozen=True)
class SrunRecipe:
    """Job steps inside a Slurm allocation (harness/launchers/srun/launcher.py)."""

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
    `python -m harness.rank.srun_task STYLE -- ARGV` in front of each task."""
