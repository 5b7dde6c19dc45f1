"""The recipe a backend gives batch scripts (docs/ARCHITECTURE.md, "Launcher"): how it starts the backend's ranks
differently from the default; a backend that gives none gets this type's defaults."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar

from harness.contracts.recipes import recipe_type


REFERENCE_COMMAND = ("ddlbench", "run", "--workload", "resnet50", "--method", "wfbp-a2a", "--note", "two words")
"""What the styles' reference scripts run (a backend adds its `--backend`): a word with a space in it, quoted."""


@dataclass(frozen=True)
class SbatchStyle:
    """One way a batch script starts the workers (`SbatchSpec.launch`)."""

    render: Callable[[Any], str]
    """(SbatchSpec) -> the script's launch block, after the rendezvous lines."""
    extra_nodes: Callable[[Any], int] = lambda spec: 0
    """(SbatchSpec) -> nodes the job needs beyond the worker nodes (e.g. dedicated server nodes)."""
    reference: dict = field(default_factory=dict)
    """SbatchSpec fields of this style's reference script, exercising the options it renders: its text is
    tests/data/sbatch_reference_<style>.sh, written by `python tests/unit/launchers/test_sbatch_render.py
    --regenerate` and compared with the rendered one by that test."""


@recipe_type
@dataclass(frozen=True)
class SbatchRecipe:
    """Batch scripts (harness/launchers/sbatch/script.py, sweep_jobs.py)."""

    launcher: ClassVar[str] = "sbatch"
    styles: dict = field(default_factory=dict)
    """Launch styles this backend renders: style -> SbatchStyle."""
    examples: tuple = ()
    """Example scripts (slurm/*.sbatch): dicts of name, sweep (a slurm/sweeps/<name>.yaml), notes and SbatchSpec
    fields."""
    sweeps: dict = field(default_factory=dict)
    """The sweep files its examples run: name -> {"notes": comment lines, "sweep": the file's keys}, written as
    slurm/sweeps/<name>.yaml (harness/jobs/sweep_jobs.example_sweeps) by `python
    tests/integration/slurm/test_slurm_sweep.py --regenerate`, which also writes the example scripts."""
