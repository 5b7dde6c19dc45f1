"""Checks only real GPUs can make (python -m pytest -m gpu tests): run where CUDA is present, reported as
not run elsewhere (a warning and a skip naming what is missing). `ddlbench doctor` lists them
(harness/doctor/gpu_checks.py).

- every registered scheme lossless at 2 GPUs over NCCL (ranks bitwise identical, equal to single-process
  training within fp tolerance);
- on a communication-heavy cell (bert-base, NCCL forced onto sockets: no NVLink/P2P/SHM shortcut),
  wfbp/mgwfbp/bytescheduler expose communication where it belongs (comm_wait_s, ByteScheduler's
  forward_wait_s), the probe times the real collective, and the overlap ratio is strictly between 0 and 1;
- ByteScheduler's credit window bounds the bytes in flight (its partition trace, DDLBENCH_BS_TRACE=1);
- the phases timed by CUDA events agree within 5% with a synchronised wall clock over the iteration;
- fp32 cells run without TF32.
"""

from __future__ import annotations

import json
import statistics
import time
import warnings

import pytest
import torch

from harness.backends import BACKENDS
from harness.cell import CellSpec, resolve
from harness.launch.local import launch_cell
from harness.measure.loop import run_loop
from harness.schemes import SCHEMES, SchemeContext
from harness.training import make_optimizer
from test_lossless import SMALL, STEPS, check, reference, run_and_load
from test_timing_units import in_flight_peak
from workloads import WORKLOADS

pytestmark = pytest.mark.gpu

COMMUNICATING = sorted(n for n, e in SCHEMES.items() if e.communicates)
SOCKETS_ONLY = {"NCCL_P2P_DISABLE": "1", "NCCL_SHM_DISABLE": "1"}
"""NCCL between two GPUs of one box through its socket transport: the communication-heavy setting."""
HEAVY = dict(workload="bert-base", batch=8, seq_len=128)
"""440 MB of gradients over NCCL's sockets (hundreds of ms) against a backward of tens of ms: communication
dominates, yet there is backward to overlap with (the overlap ratio has room above 0)."""


def need_gpus(n: int) -> None:
    have = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if have < n:
        warnings.warn(f"NOT RUN: this GPU check needs {n} CUDA device(s), this machine has {have}")
        pytest.skip(f"NOT RUN: needs {n} CUDA device(s), found {have}")


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
        warnings.warn(f"NOT RUN: {scheme} on 2 GPUs: {missing}")
        pytest.skip(f"NOT RUN: {missing}")
    wl = "bert-base-tiny"
    cell = CellSpec(workload=wl, scheme=scheme, backend=backend, workers=2, device="cuda", timeout_s=600,
                    servers=1 if entry.parameter_server else 0, **SMALL[wl])
    params = run_and_load(tmp_path, monkeypatch, cell)
    # the reference on the CPU: fp32 throughout (TF32 off), so the comparison is in fp tolerance
    check([{k: v.cpu() for k, v in p.items()} for p in params],
          reference(wl, 2, SMALL[wl]["batch"], SMALL[wl]["seq_len"], STEPS), wl)


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
    cell = CellSpec(scheme="bytescheduler-a2a", workers=2, device="cuda", warmup=2, iters=4, timeout_s=900,
                    knobs={"credit_mb": credit_mb, "partition_mb": part_mb}, **HEAVY)
    trace = run(tmp_path, cell, "bs")["plan"]["partition_trace"]
    credit = int(credit_mb * (1 << 20))
    largest = max(b for _, b, _, _ in trace)
    assert largest <= int(part_mb * (1 << 20)) + 4
    durations = sorted(e - s for _, _, s, e in trace)
    # credit returned when is_completed() says so: partitions take the network's time, not a launch's
    assert durations[len(durations) // 2] > 1e-3, f"median partition in flight {durations[len(durations) // 2]:.2e} s"
    peak = in_flight_peak(trace)
    assert peak <= max(credit, largest), f"{peak} bytes in flight under a {credit}-byte window"
    assert peak < sum(b for _, b, _, _ in trace) / (cell.warmup + cell.iters), "everything went at once"


# --- events against a synchronised wall clock -------------------------------------------------------------
def test_event_timing_agrees_with_a_synchronised_wall_clock():
    need_gpus(1)
    device = torch.device("cuda", 0)
    torch.cuda.set_device(device)
    spec = WORKLOADS.get("resnet50")
    torch.manual_seed(0)
    model = spec.build().to(device)
    batch = spec.make_batch(32, seq_len=None, device=device, seed=1)
    entry = SCHEMES.get("local")
    scheme = entry.cls(SchemeContext(transport=None, rank=0, workers=1, device=device,
                                     knobs=entry.make_knobs(None), make_optimizer=make_optimizer))
    fwd = scheme.setup(model)
    samples = run_loop(fwd, scheme, spec.loss, batch, 5, 20, device, lambda: None)
    events = statistics.median(s["forward_s"] + s["forward_wait_s"] + s["backward_s"] + s["comm_wait_s"]
                               + s["optimizer_s"] for s in samples)
    start_to_start = statistics.median(s["iter_s"] for s in samples)
    walls = []
    for _ in range(20):  # the same iteration, synchronised before and after (the reference clock)
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
    assert events == pytest.approx(wall, rel=0.05), f"events {events:.4f} s, synchronised wall {wall:.4f} s"
    assert start_to_start == pytest.approx(wall, rel=0.05), f"iter_s {start_to_start:.4f} s vs {wall:.4f} s"


# --- precision ----------------------------------------------------------------------------------------------
def test_fp32_cells_run_without_tf32(tmp_path, monkeypatch):
    need_gpus(2)
    monkeypatch.setenv("DDLBENCH_STEPS", "2")
    cell = resolve(CellSpec(workload="resnet50-tiny", scheme="ddp", workers=2, device="cuda", timeout_s=300))
    facts = json.loads(launch_cell(cell, tmp_path / "c").read_text())["facts"]
    assert facts["matmul_allow_tf32"] is False and facts["cudnn_allow_tf32"] is False
    assert facts["gpu_models"], "every rank's GPU model is recorded"
