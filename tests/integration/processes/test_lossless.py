"""Lossless means lossless (docs/ARCHITECTURE.md, "Scheme"): after k steps the parameters on every rank are
identical, and equal (fp tolerance) to single-process training on the concatenated global batch.

Each case is a real multi-process run through the harness's own launcher (gloo over loopback), with
DDLBENCH_STEPS=k (exactly k optimizer steps) and DDLBENCH_DUMP_PARAMS=1 (each rank saves its
parameters at the end). The reference trains one process on the concatenation of the ranks' batches
with the same optimizer, on the cell's device with the same kernels (deterministic algorithms where the
device has them, in the ranks and in the reference): a CPU reference for a GPU run compares oneDNN's
rounding with cuDNN's, which on a BatchNorm model is as large as a lost gradient. ResNet has BatchNorm,
whose statistics are per-batch: data parallelism then equals per-shard forward passes with averaged
gradients, which is the reference used for it.

The negative control: the same run with one rank's gradient dropped in the last step
(DDLBENCH_FAULT=dropgrad:RANK:STEP) must fail the check, on every device the tests run on, so the tolerance
is shown to tell rounding from a lost gradient.
"""

from __future__ import annotations

import pytest

from harness.contracts.cell import CellSpec
from helpers import SMALL, STEPS, check, run_and_load, shared_reference

SCHEMES_2W = ["ddp", "bsp-a2a", "wfbp-a2a", "mgwfbp", "bytescheduler-a2a", "bsp-ps", "wfbp-ps", "bytescheduler-ps"]


@pytest.mark.slow
@pytest.mark.parametrize("scheme", SCHEMES_2W)
def test_lossless_two_workers_bert(scheme, tmp_path, monkeypatch):
    knobs = {"partition_mb": 1.0, "credit_mb": 2.0} if scheme.startswith("bytescheduler") else {}
    if scheme in ("bsp-ps", "wfbp-ps"):
        knobs = {"partition_mb": 1.0}
    cell = CellSpec(
        workload="bert-base-tiny",
        scheme=scheme,
        workers=2,
        device="cpu",
        knobs=knobs,
        timeout_s=240,
        **SMALL["bert-base-tiny"],
    )
    params = run_and_load(tmp_path, monkeypatch, cell)
    check(params, shared_reference("bert-base-tiny", 2, 2, 16, STEPS), "bert-base-tiny")


@pytest.mark.slow
@pytest.mark.parametrize(
    "scheme", ["bsp-a2a", "wfbp-a2a", "mgwfbp", "bytescheduler-a2a", "bsp-ps", "wfbp-ps", "bytescheduler-ps"]
)
def test_lossless_three_workers_resnet(scheme, tmp_path, monkeypatch):
    """Three workers (an odd ring), a BatchNorm model, and for PS two servers."""
    servers = 2 if scheme.endswith("-ps") else 0
    knobs = {"partition_mb": 0.25} if scheme.endswith("-ps") or scheme.startswith("bytescheduler") else {}
    cell = CellSpec(
        workload="resnet50-tiny",
        scheme=scheme,
        workers=3,
        servers=servers,
        device="cpu",
        knobs=knobs,
        timeout_s=240,
        **SMALL["resnet50-tiny"],
    )
    params = run_and_load(tmp_path, monkeypatch, cell)
    check(params, shared_reference("resnet50-tiny", 3, 4, None, STEPS), "resnet50-tiny")


@pytest.mark.slow
def test_lossless_wfbp_gpt2(tmp_path, monkeypatch):
    cell = CellSpec(
        workload="gpt2-small-tiny",
        scheme="wfbp-a2a",
        workers=2,
        device="cpu",
        timeout_s=240,
        **SMALL["gpt2-small-tiny"],
    )
    params = run_and_load(tmp_path, monkeypatch, cell)
    check(params, shared_reference("gpt2-small-tiny", 2, 2, 16, STEPS), "gpt2-small-tiny")


@pytest.mark.slow
@pytest.mark.parametrize("workload,workers,scheme", [("bert-base-tiny", 2, "wfbp-a2a"), ("resnet50-tiny", 3, "bsp-ps")])
def test_negative_control_a_dropped_gradient_fails_the_check(workload, workers, scheme, tmp_path, monkeypatch):
    """One rank's gradient of the last step dropped: the check that passes the same run intact must fail
    it (BERT: the tight per-element tolerance; ResNet with BatchNorm: the one relative to training's move)."""
    servers = 2 if scheme.endswith("-ps") else 0
    cell = CellSpec(
        workload=workload,
        scheme=scheme,
        workers=workers,
        servers=servers,
        device="cpu",
        timeout_s=240,
        **SMALL[workload],
    )
    params = run_and_load(tmp_path, monkeypatch, cell, drop=workers - 1)
    ref = shared_reference(workload, workers, SMALL[workload]["batch"], SMALL[workload].get("seq_len"), STEPS)
    with pytest.raises(AssertionError):
        check(params, ref, workload)
