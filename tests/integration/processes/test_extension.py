"""Adding a scheme, a backend, a workload and a launcher costs what docs/ARCHITECTURE.md ("How to add") says,
and nothing more: this test reads the doc's table of places and counts the files each addition touched.

A copy of the checkout gets, one after the other, a toy scheme (`toyscheme`: tests/toy_scheme.py as a file of
the package), a toy workload (`toybag` and `toybag-tiny`: a bag-of-embeddings classifier), a toy launcher
(`toy`: ddlbench's spawner behind its own registration, recipe type, in harness/contracts/recipes/ where a
backend imports it, and environment variable) and a toy
backend (`toynet`: torch's transport under another name, providing `allreduce` only, recording the version of
PyYAML as its library, with a recipe for the toy launcher, a batch-script style, an example script and its
sweep file). Each touches exactly the places of its row in the doc (the backend also the files the tests'
--regenerate writes from what it declares). Then, in that copy, without any other edit: the import checker
passes; the batch-script tests pass on the generated files; `ddlbench list` shows the scheme on the backend,
the backend under exactly the schemes that need all-reduce only, and the workload; a real sweep of the toy
workload with the toy scheme and bsp-a2a on `toynet` through the toy launcher, chosen by its environment
variable, is ok, recorded with the backend's library column and the launcher's facts; and the toy recipe type
is accepted from a backend and defaulted for the others."""

from __future__ import annotations

import fnmatch
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from helpers import ROOT, TESTS

pytestmark = pytest.mark.slow

WORKLOAD = '''"""Workload family `toybag` (a test's toy): a bag-of-embeddings classifier, synthetic tokens."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from workloads.base import WorkloadSpec, register


def _make_batch(vocab: int):
    def make_batch(batch: int, seq_len=None, device="cpu", seed: int = 0) -> dict:
        g = torch.Generator().manual_seed(seed)
        ids = torch.randint(0, vocab, (batch, seq_len or 16), generator=g)
        return {"input_ids": ids.to(device), "labels": torch.randint(0, 10, (batch,), generator=g).to(device)}
    return make_batch


class Bag(nn.Module):
    def __init__(self, vocab: int, width: int):
        super().__init__()
        self.embed, self.head = nn.Embedding(vocab, width), nn.Linear(width, 10)

    def forward(self, input_ids):
        return self.head(self.embed(input_ids).mean(dim=1))


def _loss(model: nn.Module, batch: dict) -> torch.Tensor:
    return F.cross_entropy(model(batch["input_ids"]), batch["labels"])  # mean over the batch


for name, vocab, width in (("toybag", 4096, 256), ("toybag-tiny", 512, 32)):
    register(WorkloadSpec(name=name, family="toybag", build=lambda v=vocab, w=width: Bag(v, w),
                          make_batch=_make_batch(vocab), loss=_loss, batch=16, seq_len=16, sample_unit="seq",
                          description="a toy: a bag of embeddings", config={"vocab": vocab, "width": width}))
'''
BACKEND_INIT = '''"""Backend `toynet` (a test's toy): torch.distributed's transport under another name."""

from harness.backends.torch_dist.transport import serve, start
from harness.contracts.backend import BackendEntry, BackendLaunch
from harness.contracts.recipes.sbatch import REFERENCE_COMMAND, SbatchRecipe, SbatchStyle
from harness.procs.argv import argv_words
from harness.contracts.recipes.toy import ToyRecipe

STYLES = {"toyrun": SbatchStyle(lambda spec: f"srun --kill-on-bad-exit=1 {argv_words(spec.command)}\\n", reference=dict(
    job_name="ddl-toyrun", command=(*REFERENCE_COMMAND, "--backend", "toynet"), nodes=2, launch="toyrun"))}
EXAMPLES = ({"name": "toynet", "sweep": "toynet", "nodes": 2, "notes": ["toynet: a toy's example script."]},)
SWEEPS = {"toynet": {"notes": ["The toy backend's sweep (slurm/toynet.sbatch)."], "sweep": {
    "name": "toynet", "workloads": ["bert-base-tiny"], "schemes": ["bsp-a2a"], "backends": ["toynet"],
    "workers": [1, 2], "device": "cpu"}}}

ENTRY = BackendEntry(
    name="toynet", description="a toy: torch's all-reduce under another name",
    provides=frozenset({"allreduce"}), library="pyyaml", start=start, serve=serve,
    launch=BackendLaunch(recipes=(ToyRecipe(greeting="toynet says hello"),
                                  SbatchRecipe(styles=STYLES, examples=EXAMPLES, sweeps=SWEEPS))),
)
'''
LAUNCHER_RECIPE = '''"""The recipe a backend gives the toy launcher."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from harness.contracts.backend import recipe_type


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
from harness.contracts.backend import recipe
from harness.contracts.recipes.toy import ToyRecipe
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


def _places() -> dict[str, tuple[list[str], list[str]]]:
    """docs/ARCHITECTURE.md's "How to add" table: kind -> (its places, what is generated from what it declares),
    as glob patterns (every `<...>` a wildcard, a folder its files)."""
    text = (ROOT / "docs" / "ARCHITECTURE.md").read_text()
    section = text.split("\n## How to add\n", 1)[1].split("\n## ", 1)[0]

    def patterns(cell: str) -> list[str]:
        return [re.sub(r"<[^>]+>", "*", p) + ("*" if p.endswith("/") else "") for p in re.findall(r"`([^`]+)`", cell)]

    rows = [line.strip("|").split("|") for line in section.splitlines() if line.startswith("| a ")]
    return {cells[0].strip().removeprefix("a "): (patterns(cells[1]), patterns(cells[2])) for cells in rows}


def _copy(dst: Path) -> Path:
    """The checkout's code (not its git history, results or reports)."""

    def ignore(folder: str, names: list[str]) -> set[str]:
        top = Path(folder) == ROOT
        return {
            n
            for n in names
            if n in ("__pycache__", ".git", ".pytest_cache")
            or n.endswith(".egg-info")
            or (top and n in ("results", "reports"))
        }

    shutil.copytree(ROOT, dst, ignore=ignore)
    return dst


def _append(path: Path, line: str) -> None:
    path.write_text(path.read_text() + line)


def _regenerate_catalogue(repo: Path) -> None:
    """What `ddlbench list` reads without importing torch, made again from the copy's registries."""
    done = subprocess.run(
        [sys.executable, "-m", "harness.cli.catalog", "--regenerate"],
        capture_output=True,
        text=True,
        cwd=repo,
        env={**os.environ, "PYTHONPATH": str(repo)},
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]


def _add_scheme(repo: Path) -> None:
    # in the tree a scheme imports the modules beside it, not the package face that loads it (a circle)
    toy = (
        (TESTS / "toy_scheme.py")
        .read_text()
        .replace('register("toy", Toy,', 'register("toyscheme", Toy,')
        .replace(
            "from harness.schemes import Knobs, Range, Scheme, register",
            "from harness.schemes.base import Scheme, register\nfrom harness.schemes.knobs import Knobs, Range",
        )
    )
    assert "from harness.schemes.base import" in toy
    (repo / "harness/schemes/toyscheme.py").write_text(toy)
    _regenerate_catalogue(repo)


def _add_workload(repo: Path) -> None:
    (repo / "workloads/toybag.py").write_text(WORKLOAD)
    _append(repo / "workloads/__init__.py", "from workloads import toybag  # noqa: F401,E402\n")
    _regenerate_catalogue(repo)


def _add_backend(repo: Path, env: dict) -> None:
    (repo / "harness/backends/toynet").mkdir()
    (repo / "harness/backends/toynet/__init__.py").write_text(BACKEND_INIT)
    init = repo / "harness/backends/__init__.py"
    init.write_text(
        init.read_text()
        .replace(
            "from harness.backends import byteps, deepspeed, horovod, torch_dist\n",
            "from harness.backends import byteps, deepspeed, horovod, torch_dist, toynet\n",
        )
        .replace(
            "PLUGINS = (torch_dist, byteps, deepspeed, horovod)",
            "PLUGINS = (torch_dist, byteps, deepspeed, horovod, toynet)",
        )
    )
    for script in ("tests/unit/launchers/test_sbatch_render.py", "tests/integration/slurm/test_slurm_sweep.py"):
        done = subprocess.run(
            [sys.executable, script, "--regenerate"],
            capture_output=True,
            text=True,
            cwd=repo,
            env={**env, "PYTHONPATH": f"{repo}:{repo / 'tests'}"},
            timeout=300,
        )
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    _regenerate_catalogue(repo)


def _add_launcher(repo: Path) -> None:
    (repo / "harness/launchers/toy").mkdir()
    (repo / "harness/launchers/toy/__init__.py").write_text('"""The toy launcher."""\n')
    (repo / "harness/contracts/recipes/toy.py").write_text(LAUNCHER_RECIPE)
    (repo / "harness/launchers/toy/launcher.py").write_text(LAUNCHER)
    choose = repo / "harness/launchers/choose.py"
    choose.write_text(
        choose.read_text().replace(
            'ORDER = ("testbed", "nodes", "srun", "local")', 'ORDER = ("testbed", "nodes", "toy", "srun", "local")'
        )
    )


CLUSTER = """# a toy lab: 2 GPUs a node on 25 GbE, its Horovod paying a negotiation round per collective
label = "toylab"
gpus_per_node = 2
[links]
inter = "eth-25g"
intra = { rate_gbit_s = 96.0, latency_s = 2e-6 }
[stacks.hvd]
negotiation_s = 1e-4
[methods.wfbp-a2a]
stack = "hvd"
"""


def _add_cluster(repo: Path) -> None:
    (repo / "examples/toylab.toml").write_text(CLUSTER)


def _files(repo: Path) -> dict[str, bytes]:
    """Every file of the copy and its content (a generated file an earlier addition wrote counts again when
    a later one writes it anew)."""
    return {
        str(p.relative_to(repo)): p.read_bytes()
        for p in repo.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    }


def _check_places(kind: str, touched: set[str], places: list[str], generated: list[str]) -> None:
    """Each touched file is one of the row's places, and each place of the row was touched."""
    unlisted = sorted(f for f in touched if not any(fnmatch.fnmatch(f, p) for p in places + generated))
    untouched = [p for p in places + generated if not any(fnmatch.fnmatch(f, p) for f in touched)]
    assert not unlisted and not untouched, (
        f"adding a {kind} touched {len(touched)} file(s); not in the doc: "
        f"{unlisted}; in the doc but not touched: {untouched}"
    )


def test_a_toy_scheme_workload_backend_and_launcher_need_only_the_documented_places(tmp_path):
    places = _places()
    assert set(places) == {"scheme", "backend", "workload", "launcher", "cluster"}, places
    repo = _copy(tmp_path / "repo")
    env = {**os.environ, "PYTHONPATH": str(repo)}
    before = _files(repo)
    for kind, add in (
        ("scheme", _add_scheme),
        ("workload", _add_workload),
        ("launcher", _add_launcher),
        ("backend", lambda r: _add_backend(r, env)),  # the toy backend gives the toy launcher a recipe
        ("cluster", _add_cluster),
    ):
        add(repo)
        now = _files(repo)
        _check_places(kind, {f for f, data in now.items() if before.get(f) != data}, *places[kind])
        before = now

    check = subprocess.run(
        [sys.executable, str(repo / "scripts/check_imports.py")],
        capture_output=True,
        text=True,
        cwd=repo,
        env=env,
        timeout=120,
    )
    assert check.returncode == 0, check.stdout[-2000:]
    generated = subprocess.run(  # the tests that require the generated files pass on them
        [
            sys.executable,
            "-m",
            "pytest",
            "-x",
            "-q",
            "-p",
            "no:cacheprovider",
            "tests/unit/launchers/test_sbatch_render.py",
            "tests/integration/slurm/test_slurm_sweep.py",
            "-k",
            "reference or example or sweep_file or stray",
        ],
        capture_output=True,
        text=True,
        cwd=repo,
        env=env,
        timeout=300,
    )
    assert generated.returncode == 0, generated.stdout[-3000:]

    listing = subprocess.run(
        [sys.executable, "-m", "harness.cli.main", "list"],
        capture_output=True,
        text=True,
        cwd=repo,
        env=env,
        timeout=120,
    ).stdout
    lines = {ln.split()[0]: ln for ln in listing.splitlines() if "(backends:" in ln}
    assert "toynet" in lines["bsp-a2a"] and "toynet" in lines["mgwfbp"] and "toynet" in lines["wfbp-a2a"]
    assert "toynet" not in lines["dear"] and "toynet" not in lines["ddp"] and "toynet" not in lines["bsp-ps"]
    assert "toynet" in lines["toyscheme"] and "\n  toynet " in listing and "toybag-tiny" in listing

    sweep = tmp_path / "toy.yaml"
    sweep.write_text(
        "name: toy\nworkloads: [toybag-tiny]\nschemes: [bsp-a2a, toyscheme]\nbackends: [toynet]\n"
        "workers: [2]\nbatch: 2\nseq_len: 16\nwarmup: 1\niters: 2\ndevice: cpu\ntimeout_s: 180\n"
    )
    out = tmp_path / "run"
    run = subprocess.run(
        [sys.executable, "-m", "harness.cli.main", "sweep", str(sweep), "--output", str(out), "--no-progress"],
        capture_output=True,
        text=True,
        cwd=repo,
        timeout=600,
        env={**env, "TOY_SCHEDULER": "1"},
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    summary = pd.read_parquet(out / "summary.parquet")
    assert (summary["status"] == "ok").all() and set(summary["workload"]) == {"toybag-tiny"}
    assert set(summary["scheme"]) == {"local", "bsp-a2a", "toyscheme"}
    cell = summary[summary["backend"] == "toynet"].set_index("scheme")
    assert set(cell.index) == {"bsp-a2a", "toyscheme"}
    for scheme in cell.index:
        assert (out / "cells" / cell.loc[scheme, "cell_id"] / "toy.txt").read_text() == "toynet says hello"
    assert (out / "cells" / summary[summary["scheme"] == "local"].iloc[0]["cell_id"] / "toy.txt").read_text() == "hello"
    environment = pd.read_parquet(out / "environment.parquet").iloc[0]
    assert environment["toy_scheduler"] == "yes" and "toynet" in environment["libraries"].split(",")
    assert environment["toynet"] and environment["toynet"][0].isdigit()  # PyYAML's version

    # the cluster file, touching no code, predicted through the same door as the study's clusters
    predicted = tmp_path / "toylab.parquet"
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "harness.cli.main",
            "predict",
            "--workload",
            "bert-base",
            "--device-preset",
            "study-gpu",
            "--compute",
            "flops",
            "--cluster",
            "examples/toylab.toml",
            "--nodes",
            "1,4",
            "--schemes",
            "bsp-a2a,wfbp-a2a,toyscheme",
            "-o",
            str(predicted),
        ],
        capture_output=True,
        text=True,
        cwd=repo,
        timeout=300,
        env=env,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    rows = pd.read_parquet(predicted)
    assert set(rows["network"]) == {"toylab"} and sorted(set(rows["workers"])) == [2, 8]
    assert set(rows["scheme"]) == {"bsp-a2a", "wfbp-a2a", "toyscheme"} and (rows["throughput_median"] > 0).all()
