"""The two schemes beyond the study, `dear` and `fsdp` (docs/ARCHITECTURE.md, "DeAR and FSDP"): lossless at
2 and 3 workers (real multi-process runs through the harness's launcher: parameters bitwise identical on
every rank, equal within fp tolerance to single-process training, the checks of
tests/integration/processes/test_lossless.py), their knobs refused in one line, and the predictor simulating both.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from harness.contracts.cell import CellSpec
from harness.core.errors import UserError
from harness.schemes import SCHEMES
from harness.sim.dear import dear_groups
from helpers import SMALL, STEPS, check, must_have, run_and_load, run_backend, shared_reference

CASES = [("bert-base-tiny", 2), ("resnet50-tiny", 3)]


def _cell(scheme: str, workload: str, workers: int, knobs: dict | None = None) -> CellSpec:
    return CellSpec(
        workload=workload,
        scheme=scheme,
        workers=workers,
        device="cpu",
        knobs=knobs or {},
        timeout_s=300,
        **SMALL[workload],
    )


def _lossless(scheme, workload, workers, knobs, tmp_path, monkeypatch):
    params = run_and_load(tmp_path, monkeypatch, _cell(scheme, workload, workers, knobs))
    shape = SMALL[workload]
    check(params, shared_reference(workload, workers, shape["batch"], shape.get("seq_len"), STEPS), workload)


@pytest.mark.slow
@pytest.mark.parametrize("workload,workers", CASES)
def test_dear_lossless(workload, workers, tmp_path, monkeypatch):
    # small buckets, so that several reduce-scatters and all-gathers are in flight at once
    _lossless("dear", workload, workers, {"bucket_mb": 0.5}, tmp_path, monkeypatch)


@pytest.mark.slow
def test_dear_lossless_no_fusion(tmp_path, monkeypatch):
    """One bucket per layer (the paper's DeAR w/o TF), padding of odd-sized layers to 3 workers."""
    _lossless("dear", "gpt2-small-tiny", 3, {"nearby_layers": 1}, tmp_path, monkeypatch)


@pytest.mark.slow
def test_dear_lossless_on_horovod(tmp_path, monkeypatch):
    """The same scheme over Horovod's reducescatter/allgather, started by horovodrun."""
    must_have("horovod")
    cell = CellSpec(
        workload="bert-base-tiny",
        scheme="dear",
        backend="horovod",
        workers=2,
        device="cpu",
        knobs={"bucket_mb": 0.5},
        timeout_s=420,
        **SMALL["bert-base-tiny"],
    )
    params, result = run_backend(tmp_path, monkeypatch, cell, STEPS)
    check(params, shared_reference("bert-base-tiny", 2, 2, 16, STEPS), "bert-base-tiny")
    assert result["dist"]["source"] == "horovodrun"
    assert result["plan"]["buckets"] >= 2


@pytest.mark.slow
@pytest.mark.parametrize("workload,workers", CASES)
def test_fsdp_lossless(workload, workers, tmp_path, monkeypatch):
    _lossless("fsdp", workload, workers, {}, tmp_path, monkeypatch)


@pytest.mark.slow
def test_fsdp_lossless_whole_model_kept_unsharded(tmp_path, monkeypatch):
    """The other granularity and reshard setting: one unit for the whole model, kept after forward."""
    _lossless("fsdp", "gpt2-small-tiny", 2, {"wrap": "model", "reshard_after_forward": 0}, tmp_path, monkeypatch)


def test_dear_groups_follow_the_threshold():
    mb = 1 << 20
    assert dear_groups([10 * mb, 10 * mb, 10 * mb], 25 * mb) == [[0, 1], [2]]
    assert dear_groups([30 * mb, 1 * mb], 25 * mb) == [[0], [1]]  # a large layer opens a bucket alone
    assert dear_groups([1, 1, 1, 1, 1], 25 * mb, nearby_layers=2) == [[0, 1], [2, 3], [4]]


@pytest.mark.parametrize(
    "scheme,knob",
    [
        ("dear", "bucket_mb=0"),
        ("dear", "nearby_layers=-1"),
        ("fsdp", "wrap=layer"),
        ("fsdp", "reshard_after_forward=2"),
    ],
)
def test_bad_knob_exits_2_in_one_line(scheme, knob, tmp_path):
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "harness.cli.main",
            "run",
            "--workload",
            "bert-base-tiny",
            "--scheme",
            scheme,
            "--workers",
            "2",
            "--device",
            "cpu",
            "--knob",
            knob,
            "--output",
            str(tmp_path / "run"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 2, r.stderr
    lines = [x for x in r.stderr.strip().splitlines() if x.strip()]
    assert len(lines) == 1 and knob.split("=")[0] in lines[0], r.stderr
    assert "Traceback" not in r.stderr


def test_knob_validation_in_process():
    with pytest.raises(UserError, match="wrap"):
        SCHEMES.get("fsdp").make_knobs({"wrap": "everything"})
    assert SCHEMES.get("fsdp").make_knobs({"wrap": "model"}).wrap == "model"


def test_transport_without_the_primitive_refuses_in_one_line():
    from harness.contracts.transport import Transport

    class Bare(Transport):  # a backend that implements only the abstract operations
        allreduce_async = barrier = broadcast_object = gather_object = allreduce_min_ = lambda *a, **k: None

    with pytest.raises(UserError) as e:
        Bare().reduce_scatter_async(torch.zeros(4), torch.zeros(2), "x")
    assert "reduce-scatter" in str(e.value) and "\n" not in str(e.value)
    with pytest.raises(UserError, match="all-gather"):
        Bare().all_gather_async(torch.zeros(2), torch.zeros(4), "x")
