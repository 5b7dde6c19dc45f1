"""Bring your own model (issue 25, item 1): a workload named by its Python path trains losslessly on 2
ranks, and ranks started with `python -P` import a user's package found only in the working directory.

    pytest -q tests/integration/processes/test_byom.py        # ~1 min on 2 cores
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pandas as pd
import pytest

from harness.contracts.cell import CellSpec
from helpers import ROOT, STEPS, check, reference, run_and_load
from workloads import WORKLOADS

EXAMPLE = "examples.byom_model:build"


@pytest.mark.slow
@pytest.mark.parametrize("scheme", ["ddp", "wfbp-a2a"])
def test_example_trains_losslessly_on_two_ranks(tmp_path, monkeypatch, scheme):
    params = run_and_load(
        tmp_path, monkeypatch, CellSpec(workload=EXAMPLE, scheme=scheme, workers=2, batch=4, seq_len=8, device="cpu")
    )
    check(params, reference(EXAMPLE, 2, 4, 8, STEPS), EXAMPLE)


def test_the_spec_is_named_by_its_path_and_cell_ids_have_no_colon():
    spec = WORKLOADS.get(EXAMPLE)
    assert spec.name == EXAMPLE and EXAMPLE in WORKLOADS
    cell = CellSpec(workload=EXAMPLE, scheme="ddp", workers=2)
    assert ":" not in cell.cell_id and cell.cell_id.startswith("examples.byom_model.build.ddp.")


@pytest.mark.slow
def test_a_package_in_the_working_directory_reaches_every_rank(tmp_path):
    """`ddlbench run` from the folder holding the user's package, nothing on PYTHONPATH but the harness:
    the driver finds it as `python -m` would and passes the folder on to the ranks (which run -P)."""
    pkg = tmp_path / "mypkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    shutil.copy(ROOT / "examples" / "byom_model.py", pkg / "models.py")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "harness.cli.main",
            "run",
            "--workload",
            "mypkg.models:build",
            "--scheme",
            "ddp",
            "--workers",
            "2",
            "--batch",
            "4",
            "--warmup",
            "1",
            "--iters",
            "2",
            "--output",
            str(tmp_path / "r"),
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    row = pd.read_parquet(tmp_path / "r" / "summary.parquet").iloc[0]
    assert row["workload"] == "mypkg.models:build" and row["status"] == "ok" and row["workers"] == 2


def test_a_module_found_in_the_working_directory_goes_on_the_ranks_pythonpath(tmp_path, monkeypatch):
    """Ranks run `python -P` (no working directory on sys.path) and may start elsewhere (srun, testbed):
    the folder the driver found the module in is passed on through PYTHONPATH."""
    (tmp_path / "byom_cwd_probe.py").write_text((ROOT / "examples" / "byom_model.py").read_text())
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    spec = WORKLOADS.get("byom_cwd_probe:build")
    assert spec.name == "byom_cwd_probe:build"
    assert os.environ["PYTHONPATH"].split(os.pathsep) == [str(ROOT), str(tmp_path)]
    sys.modules.pop("byom_cwd_probe", None)
