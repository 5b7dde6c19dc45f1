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

import os

import pytest
import torch

from harness.cell import CellSpec, resolve
from harness.launch.local import launch_cell
from harness.training import make_optimizer, set_precision
from workloads import WORKLOADS

STEPS = int(os.environ.get("LOSSLESS_STEPS", "5"))  # > every scheme's profiling iterations, so planned schedules (groups, orders) are exercised
SMALL = {"bert-base-tiny": dict(batch=2, seq_len=16), "resnet50-tiny": dict(batch=4),
         "gpt2-small-tiny": dict(batch=2, seq_len=16)}


DETERMINISTIC_ENV = {"DDLBENCH_DETERMINISTIC": "1", "CUBLAS_WORKSPACE_CONFIG": ":4096:8"}
"""What the ranks and the reference run with: deterministic algorithms (harness/worker.py, `deterministic`);
cuBLAS reads its workspace setting before its first use."""


def reference(workload: str, workers: int, batch: int, seq_len, steps: int,
              device: str = "cpu") -> dict[str, torch.Tensor]:
    """Single-process training on the ranks' concatenated batches, on `device` (returned on the CPU)."""
    for k, v in DETERMINISTIC_ENV.items():
        os.environ.setdefault(k, v)
    torch.use_deterministic_algorithms(True, warn_only=True)
    set_precision("fp32")
    torch.set_num_threads(1)
    spec = WORKLOADS.get(workload)
    torch.manual_seed(0)
    model = spec.build().to(device)
    model.train()
    opt = make_optimizer([p for p in model.parameters() if p.requires_grad])
    shards = [spec.make_batch(batch, seq_len=seq_len, device=device, seed=1000 + r) for r in range(workers)]
    for _ in range(steps):
        if spec.per_sample_norm:
            whole = {k: torch.cat([s[k] for s in shards]) for k in shards[0]}
            spec.loss(model, whole).backward()
        else:
            for s in shards:
                (spec.loss(model, s) / workers).backward()
        opt.step()
        opt.zero_grad()
    torch.use_deterministic_algorithms(False)
    return {n: p.detach().cpu() for n, p in model.named_parameters()}


def run_and_load(tmp_path, monkeypatch, cell: CellSpec, drop: int | None = None) -> list[dict]:
    """Run the cell for STEPS steps and load every rank's parameters; `drop`: that rank's gradient of the
    last step is dropped (the negative control)."""
    monkeypatch.setenv("DDLBENCH_STEPS", str(STEPS))
    monkeypatch.setenv("DDLBENCH_DUMP_PARAMS", "1")
    for k, v in DETERMINISTIC_ENV.items():
        monkeypatch.setenv(k, v)
    if drop is not None:
        monkeypatch.setenv("DDLBENCH_FAULT", f"dropgrad:{drop}:{STEPS - 1}")
    cell = resolve(cell)
    d = tmp_path / cell.cell_id
    launch_cell(cell, d)
    return [{k: v.cpu() for k, v in torch.load(d / f"params.rank{r}.pt").items()} for r in range(cell.workers)]


def initial(workload: str) -> dict[str, torch.Tensor]:
    torch.manual_seed(0)
    return {n: p.detach().clone() for n, p in WORKLOADS.get(workload).build().named_parameters()}


def check(params: list[dict], ref: dict, workload: str) -> None:
    first = params[0]
    for r, other in enumerate(params[1:], start=1):
        for name, t in first.items():
            assert torch.equal(t, other[name]), f"rank {r} differs from rank 0 in {name}"
    assert set(first) == set(ref)
    if WORKLOADS.get(workload).per_sample_norm:
        for name, t in first.items():
            torch.testing.assert_close(t, ref[name], rtol=1e-4, atol=1e-6, msg=lambda m: f"{name}: {m}")
        return
    # BatchNorm over 2-sample shards amplifies float rounding (3 ranks sum in another order than one
    # process) step after step; the measure that tells lossless from lossy is then the discrepancy
    # relative to how far training moved each tensor: a dropped or stale gradient is of that order.
    init = initial(workload)
    for name, t in first.items():
        moved = (ref[name] - init[name]).norm()
        off = (t - ref[name]).norm()
        assert moved > 0, f"{name} did not train"
        assert off <= 1e-2 * moved, f"{name}: off by {off:.3g}, training moved it {moved:.3g}"


SCHEMES_2W = ["ddp", "bsp-a2a", "wfbp-a2a", "mgwfbp", "bytescheduler-a2a", "bsp-ps", "wfbp-ps",
              "bytescheduler-ps"]


@pytest.mark.slow
@pytest.mark.parametrize("scheme", SCHEMES_2W)
def test_lossless_two_workers_bert(scheme, tmp_path, monkeypatch):
    knobs = {"partition_mb": 1.0, "credit_mb": 2.0} if scheme.startswith("bytescheduler") else {}
    if scheme in ("bsp-ps", "wfbp-ps"):
        knobs = {"partition_mb": 1.0}
    cell = CellSpec(workload="bert-base-tiny", scheme=scheme, workers=2, device="cpu", knobs=knobs,
                    timeout_s=240, **SMALL["bert-base-tiny"])
    params = run_and_load(tmp_path, monkeypatch, cell)
    check(params, reference("bert-base-tiny", 2, 2, 16, STEPS), "bert-base-tiny")


@pytest.mark.slow
@pytest.mark.parametrize("scheme", ["bsp-a2a", "wfbp-a2a", "mgwfbp", "bytescheduler-a2a", "bsp-ps",
                                    "wfbp-ps", "bytescheduler-ps"])
def test_lossless_three_workers_resnet(scheme, tmp_path, monkeypatch):
    """Three workers (an odd ring), a BatchNorm model, and for PS two servers."""
    servers = 2 if scheme.endswith("-ps") else 0
    knobs = {"partition_mb": 0.25} if scheme.endswith("-ps") or scheme.startswith("bytescheduler") else {}
    cell = CellSpec(workload="resnet50-tiny", scheme=scheme, workers=3, servers=servers, device="cpu",
                    knobs=knobs, timeout_s=240, **SMALL["resnet50-tiny"])
    params = run_and_load(tmp_path, monkeypatch, cell)
    check(params, reference("resnet50-tiny", 3, 4, None, STEPS), "resnet50-tiny")


@pytest.mark.slow
def test_lossless_wfbp_gpt2(tmp_path, monkeypatch):
    cell = CellSpec(workload="gpt2-small-tiny", scheme="wfbp-a2a", workers=2, device="cpu", timeout_s=240,
                    **SMALL["gpt2-small-tiny"])
    params = run_and_load(tmp_path, monkeypatch, cell)
    check(params, reference("gpt2-small-tiny", 2, 2, 16, STEPS), "gpt2-small-tiny")


@pytest.mark.slow
@pytest.mark.parametrize("workload,workers,scheme", [("bert-base-tiny", 2, "wfbp-a2a"),
                                                      ("resnet50-tiny", 3, "bsp-ps")])
def test_negative_control_a_dropped_gradient_fails_the_check(workload, workers, scheme, tmp_path, monkeypatch):
    """One rank's gradient of the last step dropped: the check that passes the same run intact must fail
    it (BERT: the tight per-element tolerance; ResNet with BatchNorm: the one relative to training's move)."""
    servers = 2 if scheme.endswith("-ps") else 0
    cell = CellSpec(workload=workload, scheme=scheme, workers=workers, servers=servers, device="cpu",
                    timeout_s=240, **SMALL[workload])
    params = run_and_load(tmp_path, monkeypatch, cell, drop=workers - 1)
    ref = reference(workload, workers, SMALL[workload]["batch"], SMALL[workload].get("seq_len"), STEPS)
    with pytest.raises(AssertionError):
        check(params, ref, workload)
