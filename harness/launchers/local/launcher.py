"""The local launcher: every rank on this box, started by ddlbench's spawner (harness/spawner/), or by the
backend's own single-box launch program where its `LocalRecipe` has one (horovodrun, the deepspeed launch program)."""

from __future__ import annotations

from pathlib import Path

from harness.contracts.backend import recipe
from harness.contracts.cell import CellSpec
from harness.contracts.launcher import Launcher, LauncherEntry, register
from harness.contracts.placement import Placement
from harness.contracts.recipes.local import LocalRecipe
from harness.spawner.cell import launch_cell, place_one_box


def launch_one_box(cell: CellSpec, cell_dir: Path, placement: Placement | None = None) -> Path:
    """The local launcher's `launch`: the backend's own single-box launch program where its `LocalRecipe` has one
    (horovodrun, the deepspeed launch program), else the spawner's `launch_cell`."""
    return (recipe(cell.backend, LocalRecipe).launch or launch_cell)(cell, cell_dir, placement)


def make(request) -> Launcher:
    """This box: one node per cell, dedicated server hosts refused."""
    return Launcher("local", launch_one_box, nodes_for=lambda workers: 1, place=place_one_box)


register(
    LauncherEntry(
        "local",
        "every rank on this box (a backend's own single-box launch program where it has one); the default "
        "outside a Slurm allocation",
        make=make,
        detect=lambda request: True,
    )
)
