"""Checks only real GPUs can make (python -m pytest -m gpu tests): run where CUDA is present, reported as
NOT RUN elsewhere (a warning and a skip naming what is missing). `ddlbench doctor` lists them
(harness/doctor/gpu_checks.py). The one-GPU part lives in tests/integration/gpu/test_gpu_one.py (NCCL at world size 1,
ranks sharing the GPU over gloo, TF32 by behaviour, throughput against a bare loop, the GPU profile); this
file holds what needs two or more GPUs on one node:

- every registered scheme lossless at 2 GPUs over NCCL (ranks bitwise identical, equal to single-process
  training within fp tolerance), the group's backend asserted;
- on a communication-heavy cell (bert-base, NCCL forced onto sockets: no NVLink/P2P/SHM/InfiniBand
  shortcut), wfbp/mgwfbp/bytescheduler expose communication where it belongs (comm_wait_s, ByteScheduler's
  forward_wait_s), the probe times the real collective, and the overlap ratio is strictly between 0 and 1;
- ByteScheduler's credit returns when NCCL has really finished a partition (its partition trace,
  DDLBENCH_BS_TRACE=1): partitions take the network's time, not a launch's;
- fp32 cells on two GPUs run without TF32, by behaviour (the ranks' results equal an fp32 reference).
"""

from __future__ import annotations

import json
import statistics
import warnings

import pytest

from harness.contracts.backend import BACKENDS
from harness.contracts.cell import CellSpec
from harness.experiment.cells import resolve
from harness.schemes import SCHEMES
from harness.spawner.cell import launch_cell
from helpers import (
    SMALL,
    STEPS,
    check,
    in_flight_peak,
    need_gpus,
    reference,
    run_and_load,
)

pytestmark = pytest.mark.gpu

COMMUNICATING = sorted(n for n, e in SCHEMES.items() if e.communicates)
SOCKETS_ONLY = {"NCCL_P2P_DISABLE": "1", "NCCL_SHM_DISABLE": "1", "NCCL_IB_DISABLE": "1", "NCCL_NET": "Socket"}
"""NCCL between two GPUs of one box through its socket transport (no NVLink/P2P, no shared memory, and on an
HGX box with InfiniBand HCAs not the IB verbs either): the communication-heavy setting."""
HEAVY = dict(workload="bert-base", batch=8, seq_len=128)
"""440 MB of gradients over NCCL's sockets (hundreds of ms) against a backward of tens of ms: communication
dominates, yet there is backward to overlap with (the overlap ratio has room above 0)."""


def medians(result: dict, rank: int = 0) -> dict:
    samples = result["ranks"][rank]["samples"]
    return {k: statistics.median(s[k] for s in samples) for k in samples[0] if k != "iteration"}


def run(tmp_path, cell: CellSpec, name: str) -> dict:
    return json.loads(launch_cell(resolve(cell), tmp_path / name).read_text())


# --- lossless ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("scheme", COMMUNICATING)
def test_every_scheme_is_lossless_on_two_gpus(tmp_path, monkeypatch, scheme):
    need_gpus(2)
    entry = SCHEMES.get(scheme)
    backend = entry.backends[0]
    missing = BACKENDS.get(backend).available()
    if missing:
        warnings.warn(f"NOT RUN: {scheme} on 2 GPUs: {missing}", stacklevel=1)
        pytest.skip(f"NOT RUN: {missing}")
    wl = "bert-base-tiny"
    cell = CellSpec(
        workload=wl,
        scheme=scheme,
        backend=backend,
        workers=2,
        device="cuda",
        timeout_s=600,
        servers=1 if entry.parameter_server else 0,
        **SMALL[wl],
    )
    params = run_and_load(tmp_path, monkeypatch, cell)
    result = json.loads((tmp_path / resolve(cell).cell_id / "result.json").read_text())
    assert {r["dist_backend"] for r in result["ranks"]} <= {"nccl", "horovod-nccl"}, result["ranks"][0]
    # the reference on the GPU, fp32 throughout (TF32 off), deterministic kernels: the same kernels as the ranks
    check(
        [{k: v.cpu() for k, v in p.items()} for p in params],
        reference(wl, 2, SMALL[wl]["batch"], SMALL[wl]["seq_len"], STEPS, device="cuda"),
        wl,
    )


# --- exposed communication and overlap on a communication-heavy cell ------------------------------------
@pytest.fixture(scope="module")
def compute_only(tmp_path_factory):
    """The 1-GPU `local` baseline of the heavy cell: its median iteration."""
    need_gpus(2)
    cell = CellSpec(scheme="local", workers=1, device="cuda", warmup=3, iters=10, timeout_s=600, **HEAVY)
    return medians(run(tmp_path_factory.mktemp("local"), cell, "local"))["iter_s"]


@pytest.mark.parametrize("scheme", ["wfbp-a2a", "mgwfbp", "bytescheduler-a2a"])
def test_overlapping_schemes_expose_communication_where_it_happens(tmp_path, monkeypatch, compute_only, scheme):
    for k, v in SOCKETS_ONLY.items():
        monkeypatch.setenv(k, v)
    cell = CellSpec(scheme=scheme, workers=2, device="cuda", warmup=3, iters=10, timeout_s=900, **HEAVY)
    result = run(tmp_path, cell, scheme)
    m = medians(result)
    comm_only = result["ranks"][0]["comm_only_s"]
    exposed = max(0.0, m["iter_s"] - compute_only)
    assert comm_only > m["backward_s"], "the cell is not communication-heavy: the check proves nothing"
    # before events, the probe timed the launch (NCCL's wait() returns at once) and the overlap clipped to 0
    assert comm_only >= 0.5 * exposed, f"probe {comm_only:.4f} s vs exposed {exposed:.4f} s: launch latency?"
    blocked = m["comm_wait_s"] + m["forward_wait_s"]
    # with device-wide syncs, communication issued in backward was billed to backward and this was ~0
    assert blocked >= 0.1 * comm_only, f"exposed wait {blocked:.4f} s of {comm_only:.4f} s of communication"
    overlap = 1 - exposed / comm_only
    assert 0.0 < overlap < 1.0, f"overlap ratio {overlap:.3f}"
    phases = m["forward_s"] + m["forward_wait_s"] + m["backward_s"] + m["comm_wait_s"] + m["optimizer_s"]
    assert phases <= 1.05 * m["iter_s"]


# --- the credit window on NCCL ----------------------------------------------------------------------------
def test_credit_window_bounds_bytes_in_flight_on_nccl(tmp_path, monkeypatch):
    need_gpus(2)
    for k, v in {**SOCKETS_ONLY, "DDLBENCH_BS_TRACE": "1"}.items():
        monkeypatch.setenv(k, v)
    credit_mb, part_mb = 8.0, 2.0
    cell = CellSpec(
        scheme="bytescheduler-a2a",
        workers=2,
        device="cuda",
        warmup=2,
        iters=4,
        timeout_s=900,
        knobs={"credit_mb": credit_mb, "partition_mb": part_mb},
        **HEAVY,
    )
    result = run(tmp_path, cell, "bs")
    trace = result["plan"]["partition_trace"]
    largest = max(b for _, b, _, _ in trace)
    assert largest <= int(part_mb * (1 << 20)) + 4
    # A partition's credit comes back when NCCL has really moved it. The window lets credit/partition of
    # them share the link, so each takes at least its share of the link's time for the whole gradient:
    # the probe's all-reduce of every gradient byte, alone. Credit returned at launch (wait() on NCCL)
    # gives microseconds here.
    comm_only = result["ranks"][0]["comm_only_s"]
    grad_bytes = result["facts"]["grad_bytes"]
    alone = comm_only * largest / grad_bytes  # one partition's time with the link to itself
    durations = sorted(e - s for _, _, s, e in trace)
    median = durations[len(durations) // 2]
    assert median >= 0.5 * alone, f"median partition in flight {median:.2e} s, alone it takes {alone:.2e} s"
    assert in_flight_peak(trace) < sum(b for _, b, _, _ in trace) / (cell.warmup + cell.iters), (
        "everything went at once"
    )


# --- precision ----------------------------------------------------------------------------------------------
def test_fp32_cells_run_without_tf32(tmp_path, monkeypatch):
    """By behaviour: a ResNet (convolutions, where cuDNN defaults to TF32) trained 5 steps on two GPUs equals
    the CPU's fp32 training within fp32 rounding; with TF32 it drifts by ~1e-3 relative."""
    need_gpus(2)
    wl = "resnet50-tiny"
    cell = CellSpec(workload=wl, scheme="ddp", workers=2, device="cuda", timeout_s=300, **SMALL[wl])
    params = run_and_load(tmp_path, monkeypatch, cell)
    check(
        [{k: v.cpu() for k, v in p.items()} for p in params],
        reference(wl, 2, SMALL[wl]["batch"], None, STEPS, device="cuda"),
        wl,
    )
    facts = json.loads((tmp_path / resolve(cell).cell_id / "result.json").read_text())["facts"]
    assert facts["gpu_models"], "every rank's GPU model is recorded"
