"""Choosing a run's launcher (docs/ARCHITECTURE.md, "Launcher"), over the registry of
harness/contracts/launcher.py. ORDER is every launcher, by its folder's name, in the order they are asked
whether a request is theirs; `load()` imports (registers) them all, and every question below asks it first, so
that naming them (`ddlbench sweep --help`) imports none:

    testbed  every rank in its host's namespace of the emulated testbed (the sweep file's `testbed:`)
    nodes    a multi-node job without Slurm (the scheduler's variables, or --nnodes)
    srun     a job step per cell inside a Slurm allocation (SLURM_JOB_ID)
    local    every rank on this box (what no other claims)

It is also the one door of the layers above into the launchers' folders, which they never import
(docs/ARCHITECTURE.md, "Rules" 6): a launcher is chosen here and asked, and a run submitted to Slurm is the
batch script `batch_script` renders (harness/launchers/sbatch/script.py), whose `sweep` style runs the srun
launcher inside the allocation.
"""

from __future__ import annotations

import importlib

from harness.contracts.launcher import LAUNCHERS, Launcher, LauncherEntry, LaunchRequest
from harness.contracts.recipes.sbatch import SbatchSpec
from harness.core.errors import UserError
from harness.core.registry import Registry
from harness.launchers.sbatch.script import render_sbatch

ORDER = ("testbed", "nodes", "srun", "local")
"""The launchers (harness/launchers/<name>/launcher.py), asked in this order; the last takes any request."""


def load() -> Registry[LauncherEntry]:
    """Register every launcher of ORDER (once; later calls return the same registry) and return the registry."""
    for name in ORDER:  # a load within this layer, by a literal table (docs/ARCHITECTURE.md, "Plugins")
        importlib.import_module(f"harness.launchers.{name}.launcher")
    return LAUNCHERS


def by_name() -> tuple[str, ...]:
    """The launchers `--launcher` can name."""
    return tuple(name for name in ORDER if load().get(name).named)


def this_box(request: LaunchRequest) -> Launcher:
    """The launcher of a single `ddlbench run` cell unless told otherwise: the one that takes any request."""
    return load().get(ORDER[-1]).make(request)


def choose_launcher(request: LaunchRequest, name: str | None = None) -> Launcher:
    """The launcher `name` (`--launcher`), else the first in ORDER whose `detect` claims the request."""
    if name is None:
        name = next((n for n in ORDER if load().get(n).detect(request)), ORDER[-1])
    elif name not in by_name():
        raise UserError(f"unknown launcher {name!r}; available: {', '.join(by_name())}")
    return load().get(name).make(request)


def batch_script(spec: SbatchSpec) -> str:
    """The Slurm batch script of `spec` (harness/launchers/sbatch/script.py; pure: same spec, same text): how
    harness/jobs/ submits a run, its launch block the backend's style or the `sweep` style."""
    return render_sbatch(spec)
