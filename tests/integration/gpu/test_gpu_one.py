"""What one GPU can prove (python -m pytest -m gpu tests): the machine a session may be lent has exactly one
GPU, and NCCL refuses two ranks of one communicator on one device, so:

(a) every scheme at 1 worker over NCCL (world size 1): the group's backend asserted, the scheme's
    streams, events, credit logic and staging exercised, parameters equal to single-process training on
    the GPU (tests/integration/processes/test_lossless.py: the reference on the cell's device, deterministic kernels);
(b) every torch-backend scheme at 2 ranks sharing the GPU over gloo with CUDA tensors
    (`dist_backend: gloo`): lossless against the single-process reference on the GPU, and the negative
    control: the same run with one dropped gradient fails the check;
(c) TF32 off for fp32 by behaviour: matmul and convolution match float64 to fp32 accuracy, and the same
    with TF32 allowed does not (so the check can tell);
(d) timing (marked `timing`: serial, alone on the GPU): the phases timed by CUDA events against the
    device's start-to-start iteration and a synchronised wall clock, and harness/doctor/timing/gpu_timing.py: the real
    workloads at the study's batch sizes, fp32 and bf16, the harness's `local` cells against bare loops
    before and after them (harness / bare within [0.995, 1.03]; host-bound cells undecided), kernels per
    iteration, the GPU profiles and the study's table predicted from them.

Correctness runs in parallel processes (`-m "gpu and not timing" -n 8`), timing alone (`-m "gpu and
timing"`): scripts/gpu_report.sh runs both within its budget, gpu_timing.py directly rather than through
the last test here. Elsewhere every check says NOT RUN and why.
"""

from __future__ import annotations

import json
import statistics
import time
import warnings
from pathlib import Path

import pandas as pd
import pytest
import torch

from harness.contracts.backend import BACKENDS
from harness.contracts.cell import CellSpec
from harness.contracts.training import make_optimizer, set_precision
from harness.doctor.gpu_probe import fp32_without_tf32
from harness.doctor.timing import gpu_timing
from harness.experiment.cells import resolve
from harness.measure.loop import run_loop
from harness.schemes import SCHEMES, SchemeContext
from harness.spawner.cell import launch_cell
from helpers import SMALL, STEPS, check, need_gpus, reference, run_and_load
from workloads import WORKLOADS

pytestmark = pytest.mark.gpu

COMMUNICATING = sorted(n for n, e in SCHEMES.items() if e.communicates)
TORCH_SCHEMES = sorted(n for n, e in SCHEMES.items() if e.communicates and "torch" in e.backends)
PHASE_TOLERANCE = 0.05


def usable(scheme: str) -> str:
    """The backend a scheme runs on here, or a NOT RUN skip naming why none is usable."""
    for backend in SCHEMES.get(scheme).backends:
        if BACKENDS.get(backend).available() is None:
            return backend
    why = "; ".join(BACKENDS.get(b).available() for b in SCHEMES.get(scheme).backends)
    warnings.warn(f"NOT RUN: {scheme} on this GPU: {why}", stacklevel=1)
    pytest.skip(f"NOT RUN: {why}")


def result_of(tmp_path: Path, cell: CellSpec) -> dict:
    return json.loads((tmp_path / cell.cell_id / "result.json").read_text())


# --- (a) every scheme at world size 1 over NCCL ----------------------------------------------------------
@pytest.mark.parametrize("scheme", COMMUNICATING)
def test_every_scheme_at_one_worker_over_nccl(tmp_path, monkeypatch, scheme):
    need_gpus(1)
    backend = usable(scheme)
    entry = SCHEMES.get(scheme)
    wl = "bert-base-tiny"
    monkeypatch.setenv("DDLBENCH_BS_TRACE", "1")  # ByteScheduler's partition trace: credit returned on completion
    cell = resolve(
        CellSpec(
            workload=wl,
            scheme=scheme,
            backend=backend,
            workers=1,
            device="cuda",
            timeout_s=600,
            servers=1 if entry.parameter_server else 0,
            **SMALL[wl],
        )
    )
    params = run_and_load(tmp_path, monkeypatch, cell)
    result = result_of(tmp_path, cell)
    rank = result["ranks"][0]
    assert rank["dist_backend"] in ("nccl", "horovod-nccl"), rank
    if "dist_groups" in rank:
        assert "nccl" in rank["dist_groups"]["workers"], rank["dist_groups"]
    assert rank["device_name"], "the rank recorded its GPU"
    assert all(s["iter_s"] > 0 for s in rank["samples"])
    trace = result["plan"].get("partition_trace")
    if trace:  # in flight from issue to real completion: never negative, never all zero
        assert all(e >= s for _, _, s, e in trace) and max(e - s for _, _, s, e in trace) > 0
    check(params, reference(wl, 1, SMALL[wl]["batch"], SMALL[wl]["seq_len"], STEPS, device="cuda"), wl)


# --- (b) several ranks sharing the GPU over gloo, CUDA tensors ------------------------------------------------
@pytest.mark.parametrize("scheme", TORCH_SCHEMES)
def test_ranks_sharing_the_gpu_over_gloo_are_lossless(tmp_path, monkeypatch, scheme):
    need_gpus(1)
    entry = SCHEMES.get(scheme)
    wl = "bert-base-tiny"
    cell = resolve(
        CellSpec(
            workload=wl,
            scheme=scheme,
            workers=2,
            device="cuda",
            timeout_s=600,
            dist_backend="gloo",
            servers=1 if entry.parameter_server else 0,
            **SMALL[wl],
        )
    )
    params = run_and_load(tmp_path, monkeypatch, cell)
    assert {r["dist_backend"] for r in result_of(tmp_path, cell)["ranks"]} == {"gloo"}
    check(params, reference(wl, 2, SMALL[wl]["batch"], SMALL[wl]["seq_len"], STEPS, device="cuda"), wl)


@pytest.mark.parametrize("drop", [None, 2], ids=["intact", "negative-control"])
@pytest.mark.parametrize("scheme", ["bsp-ps", "bytescheduler-a2a"])
def test_three_ranks_sharing_the_gpu_with_batchnorm(tmp_path, monkeypatch, scheme, drop):
    """BatchNorm over 2-sample shards, 3 ranks: lossless against the reference on the GPU; with rank 2's last
    gradient dropped, the same check fails (the first GPU run's CPU reference was off by as much as that)."""
    need_gpus(1)
    wl = "resnet50-tiny"
    entry = SCHEMES.get(scheme)
    cell = resolve(
        CellSpec(
            workload=wl,
            scheme=scheme,
            workers=3,
            device="cuda",
            timeout_s=600,
            dist_backend="gloo",
            servers=2 if entry.parameter_server else 0,
            **SMALL[wl],
        )
    )
    params = run_and_load(tmp_path, monkeypatch, cell, drop=drop)
    ref = reference(wl, 3, SMALL[wl]["batch"], None, STEPS, device="cuda")
    if drop is None:
        check(params, ref, wl)
    else:
        with pytest.raises(AssertionError):
            check(params, ref, wl)


@pytest.mark.timing
@pytest.mark.parametrize("scheme", ["wfbp-a2a", "bytescheduler-a2a", "bsp-ps", "ddp"])
def test_event_phases_add_up_to_the_device_iteration_over_gloo(tmp_path, scheme):
    """The phases (CUDA events on the compute stream, read after the window) add up to the device's
    start-to-start iteration within 5%: nothing of an iteration is left out of its phases."""
    need_gpus(1)
    entry = SCHEMES.get(scheme)
    cell = resolve(
        CellSpec(
            workload="bert-base",
            batch=8,
            seq_len=64,
            scheme=scheme,
            workers=2,
            device="cuda",
            warmup=5,
            iters=20,
            timeout_s=900,
            dist_backend="gloo",
            servers=1 if entry.parameter_server else 0,
        )
    )
    result = json.loads(launch_cell(cell, tmp_path / "c").read_text())
    for rank in result["ranks"]:
        s = rank["samples"]
        phases = statistics.median(
            x["forward_s"] + x["forward_wait_s"] + x["backward_s"] + x["comm_wait_s"] + x["optimizer_s"] for x in s
        )
        wall = statistics.median(x["iter_s"] for x in s)
        assert phases == pytest.approx(wall, rel=PHASE_TOLERANCE), (
            f"rank {rank['rank']}: events {phases:.4f} s, iteration {wall:.4f} s"
        )


@pytest.mark.timing
def test_event_timing_agrees_with_a_synchronised_wall_clock():
    """One process, no communication: the loop's event-timed phases against the same iteration
    synchronised before and after (the reference clock)."""
    need_gpus(1)
    device = torch.device("cuda", 0)
    torch.cuda.set_device(device)
    set_precision("fp32")
    spec = WORKLOADS.get("resnet50")
    torch.manual_seed(0)
    model = spec.build().to(device)
    batch = spec.make_batch(32, seq_len=None, device=device, seed=1)
    entry = SCHEMES.get("local")
    scheme = entry.cls(
        SchemeContext(
            transport=None,
            rank=0,
            workers=1,
            device=device,
            knobs=entry.make_knobs(None),
            make_optimizer=make_optimizer,
        )
    )
    fwd = scheme.setup(model)
    samples = run_loop(fwd, scheme, spec.loss, batch, 5, 20, device, lambda: None)
    events = statistics.median(
        s["forward_s"] + s["forward_wait_s"] + s["backward_s"] + s["comm_wait_s"] + s["optimizer_s"] for s in samples
    )
    start_to_start = statistics.median(s["iter_s"] for s in samples)
    walls = []
    for _ in range(20):
        torch.cuda.synchronize(device)
        t0 = time.perf_counter()
        loss = spec.loss(fwd, batch)
        scheme.before_backward()
        scheme.backward(loss)
        scheme.after_backward()
        scheme.wait()
        scheme.step()
        torch.cuda.synchronize(device)
        walls.append(time.perf_counter() - t0)
    wall = statistics.median(walls)
    assert events == pytest.approx(wall, rel=PHASE_TOLERANCE), f"events {events:.4f} s, synchronised wall {wall:.4f} s"
    assert start_to_start == pytest.approx(wall, rel=PHASE_TOLERANCE), f"iter_s {start_to_start:.4f} s vs {wall:.4f} s"


# --- (c) TF32 off, by behaviour --------------------------------------------------------------------------------
def test_fp32_means_fp32_by_behaviour():
    need_gpus(1)
    device = torch.device("cuda", 0)
    assert fp32_without_tf32(device) == ""  # sets the fp32 policy, then compares with float64
    if torch.cuda.get_device_capability(device)[0] < 8:
        return  # no TF32 before Ampere: nothing to tell apart
    set_precision("bf16")  # the low-precision policy allows TF32: the same comparison must now fail
    try:
        x, w = torch.randn(512, 4096, device=device), torch.randn(4096, 512, device=device)
        err = float(((x @ w).double() - x.double() @ w.double()).norm() / (x.double() @ w.double()).norm())
        assert err > 1e-4, f"TF32 allowed but matmul error {err:.1e}: the fp32 check could not tell"
    finally:
        set_precision("fp32")


# --- (d) the harness against bare loops, the profiles, the study's table from them ---------------------------
@pytest.mark.timing
def test_harness_against_bare_loops_and_the_gpu_profiles(tmp_path):
    """harness/doctor/timing/gpu_timing.py on the study's workloads, fp32 and bf16 (its module docstring): every
    device-bound cell's harness / bare ratio against a steady reference within [0.995, 1.03] (where the reference
    moved more than 2% between its rounds, the harness's loop paired with the bare loop in-process decides);
    host-bound cells `undecided` with the host's pace, never a pass; every profile within 15% of its bare loop;
    the study's table predicted from the GPU profiles."""
    need_gpus(1)
    out = tmp_path / "timing"
    code = gpu_timing.main([str(out)])
    table = pd.read_csv(out / "throughput.csv")
    assert len(table) == 8 and table["host_bound"].notna().all() and table["mfu"].notna().all()
    assert (pd.read_parquet(out / "prediction" / "predictions.parquet")["workers"] > 0).all()
    assert (table["verdict"] == "ok").any(), "no cell decided: every reference drifted"
    assert (table[table["host_bound"]]["verdict"] == "undecided").all()
    assert code == 0, table[["workload", "dtype", "ratio", "bare_spread", "host_bound", "verdict"]].to_string(
        index=False
    )
