"""Adding a backend and a launcher costs what docs/ARCHITECTURE.md ("How to add") says, and nothing more.

A copy of the checkout gets a toy backend (`toynet`: torch's transport under another name, providing
`allreduce` only, recording the version of PyYAML as its library) and a toy launcher (`toy`: this box's
spawner behind its own registration, recipe type and environment variable), touching only the documented
places: the backend's package and its import line; the launcher's folder and its name in ORDER. Then, in
that copy, without any other edit: the import checker passes; `ddlbench list` shows the backend under
exactly the schemes that need all-reduce only; a real sweep run on `toynet` through the toy launcher,
chosen by its environment variable, is ok, recorded with the backend's library column and the launcher's
facts; and the toy recipe type is accepted from a backend and defaulted for the others."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from helpers import ROOT

pytestmark = pytest.mark.slow

BACKEND_INIT = '''"""Backend `toynet` (a test's toy): torch.distributed's transport under another name."""

from harness.backends.base import BackendEntry, register
from harness.backends.torch_dist.transport import serve, start
from harness.contracts.recipes import BackendLaunch
from harness.launchers.toy.recipe import ToyRecipe

register(BackendEntry(
    name="toynet", description="a toy: torch's all-reduce under another name",
    provides=frozenset({"allreduce"}), library="pyyaml", start=start, serve=serve,
    launch=BackendLaunch(recipes=(ToyRecipe(greeting="toynet says hello"),)),
))
'''
LAUNCHER_RECIPE = '''"""The recipe a backend gives the toy launcher."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from harness.contracts.recipes import recipe_type


@recipe_type
@dataclass(frozen=True)
class ToyRecipe:
    launcher: ClassVar[str] = "toy"
    greeting: str = "hello"
    """What the toy launcher writes beside each cell."""
'''
LAUNCHER = '''"""The toy launcher (a test's toy): ddlbench's spawner on this box, chosen by TOY_SCHEDULER."""

from __future__ import annotations

from harness.contracts.launcher import Launcher, LauncherEntry, register
from harness.contracts.recipes import recipe
from harness.launchers.toy.recipe import ToyRecipe
from harness.spawner.cell import launch_cell, place_one_box


def launch(cell, cell_dir, placement=None):
    cell_dir.mkdir(parents=True, exist_ok=True)
    (cell_dir / "toy.txt").write_text(recipe(cell.backend, ToyRecipe).greeting)
    return launch_cell(cell, cell_dir, placement)


register(LauncherEntry("toy", "a toy: ddlbench's spawner behind its own registration",
                       make=lambda request: Launcher("toy", launch, lambda workers: 1, place_one_box,
                                                     {"toy_scheduler": "yes"}),
                       detect=lambda request: bool(request.environ.get("TOY_SCHEDULER"))))
'''


def _copy(dst: Path) -> Path:
    """The checkout's code (not its git history, results or reports)."""
    def ignore(folder: str, names: list[str]) -> set[str]:
        top = Path(folder) == ROOT
        return {n for n in names if n in ("__pycache__", ".git") or n.endswith(".egg-info")
                or (top and n in ("results", "reports"))}
    shutil.copytree(ROOT, dst, ignore=ignore)
    return dst


def _add_toys(repo: Path) -> None:
    (repo / "harness/backends/toynet").mkdir()
    (repo / "harness/backends/toynet/__init__.py").write_text(BACKEND_INIT)
    init = repo / "harness/backends/__init__.py"
    init.write_text(init.read_text().replace("from harness.backends import byteps, deepspeed, horovod  # noqa: F401\n",
                                             "from harness.backends import byteps, deepspeed, horovod  # noqa: F401\n"
                                             "from harness.backends import toynet  # noqa: F401\n"))
    (repo / "harness/launchers/toy").mkdir()
    (repo / "harness/launchers/toy/__init__.py").write_text('"""The toy launcher."""\n')
    (repo / "harness/launchers/toy/recipe.py").write_text(LAUNCHER_RECIPE)
    (repo / "harness/launchers/toy/launcher.py").write_text(LAUNCHER)
    choose = repo / "harness/launchers/choose.py"
    choose.write_text(choose.read_text().replace('ORDER = ("testbed", "nodes", "srun", "local")',
                                                 'ORDER = ("testbed", "nodes", "toy", "srun", "local")'))


def _changed(repo: Path) -> set[str]:
    """Files of the copy that differ from the checkout or are new."""
    out = set()
    for p in repo.rglob("*"):
        if p.is_file() and "__pycache__" not in p.parts:
            rel = p.relative_to(repo)
            orig = ROOT / rel
            if not orig.exists() or orig.read_bytes() != p.read_bytes():
                out.add(str(rel))
    return out


def test_a_toy_backend_and_launcher_need_only_the_documented_places(tmp_path):
    repo = _copy(tmp_path / "repo")
    _add_toys(repo)
    assert _changed(repo) == {"harness/backends/toynet/__init__.py", "harness/backends/__init__.py",
                              "harness/launchers/toy/__init__.py", "harness/launchers/toy/recipe.py",
                              "harness/launchers/toy/launcher.py", "harness/launchers/choose.py"}
    env = {**os.environ, "PYTHONPATH": str(repo)}
    check = subprocess.run([sys.executable, str(repo / "scripts/check_imports.py")], capture_output=True, text=True,
                           cwd=repo, env=env, timeout=120)
    assert check.returncode == 0, check.stdout[-2000:]

    listing = subprocess.run([sys.executable, "-m", "harness.cli.main", "list"], capture_output=True, text=True,
                             cwd=repo, env=env, timeout=120).stdout
    lines = {ln.split()[0]: ln for ln in listing.splitlines() if "(backends:" in ln}
    assert "toynet" in lines["bsp-a2a"] and "toynet" in lines["mgwfbp"] and "toynet" in lines["wfbp-a2a"]
    assert "toynet" not in lines["dear"] and "toynet" not in lines["ddp"] and "toynet" not in lines["bsp-ps"]
    assert "\n  toynet " in listing

    sweep = tmp_path / "toy.yaml"
    sweep.write_text("name: toy\nworkloads: [bert-base-tiny]\nschemes: [bsp-a2a]\nbackends: [toynet]\n"
                     "workers: [2]\nbatch: 2\nseq_len: 16\nwarmup: 1\niters: 2\ndevice: cpu\ntimeout_s: 180\n")
    out = tmp_path / "run"
    run = subprocess.run([sys.executable, "-m", "harness.cli.main", "sweep", str(sweep), "--output", str(out),
                          "--no-progress"], capture_output=True, text=True, cwd=repo, timeout=600,
                         env={**env, "TOY_SCHEDULER": "1"})
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    summary = pd.read_parquet(out / "summary.parquet")
    cell = summary[summary["backend"] == "toynet"].iloc[0]
    assert cell["status"] == "ok" and cell["scheme"] == "bsp-a2a"
    assert (out / "cells" / cell["cell_id"] / "toy.txt").read_text() == "toynet says hello"
    assert (out / "cells" / summary[summary["scheme"] == "local"].iloc[0]["cell_id"] / "toy.txt").read_text() == "hello"
    environment = pd.read_parquet(out / "environment.parquet").iloc[0]
    assert environment["toy_scheduler"] == "yes" and "toynet" in environment["libraries"].split(",")
    assert environment["toynet"] and environment["toynet"][0].isdigit()  # PyYAML's version
