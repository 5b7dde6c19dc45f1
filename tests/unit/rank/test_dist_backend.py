"""The GPU path's logic, proved on CPU (docs/ARCHITECTURE.md, "Devices"): which torch.distributed backend a
rank joins (from the device's type, never its string), what is recorded and enforced, completion-based
waits and trace ends on NCCL, the profile's precision and clock, commbench's GPU refusal, a bounded
teardown. What needs a real GPU is in tests/integration/gpu/test_gpu.py.

    pytest -q tests/unit/rank/test_dist_backend.py      # ~20 s, one real 2-process run
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from types import SimpleNamespace

import pandas as pd
import pytest
import torch
import torch.distributed as dist
from click.testing import CliRunner

from harness.backends.torch_dist import handles
from harness.backends.torch_dist import transport as tt
from harness.cli.main import cli
from harness.commbench.driver import CommbenchSpec, run_commbench
from harness.contracts import devices
from harness.contracts.cell import CellSpec
from harness.contracts.training import bounded
from harness.core.errors import UserError
from harness.experiment import cells as cellmod
from harness.experiment.cells import resolve
from harness.gate.compare import compare_runs
from harness.gate.keys import cell_key
from harness.measure.timer import Clock
from harness.measure.trace_transport import (
    CommRecord,
    CompletionWatcher,
    TracedHandle,
    follow,
)
from harness.predict.profiler import measure_profile, time_iterations
from harness.report.tables import environment_table
from harness.results.summarize import dist_backend

# --- which backend a rank joins -------------------------------------------------------------------


class _Stop(Exception):
    pass


def test_a_cuda_device_joins_nccl_whatever_its_string(monkeypatch):
    """The bug this file exists for: `start` passed str(device) ("cuda:0") and init compared it with
    "cuda", so every GPU rank joined a gloo-only group. Failed on the old code, passes now."""
    asked = []

    def fake_init(backend, **_kw):
        asked.append(backend)
        raise _Stop

    monkeypatch.setattr(tt, "choose_interface", lambda env: {})
    monkeypatch.setattr(tt, "rendezvous_store", lambda env, timeout: None)
    monkeypatch.setattr(tt.dist, "init_process_group", fake_init)
    cell = CellSpec(workload="bert-base-tiny", scheme="ddp", workers=2, device="cuda")
    for device in (torch.device("cuda", 0), torch.device("cuda", 1), torch.device("cuda")):
        with pytest.raises(_Stop):
            tt.start(cell, SimpleNamespace(world_size=2, rank=0), device)
    assert asked == ["cpu:gloo,cuda:nccl"] * 3
    with pytest.raises(_Stop):
        tt.start(cell.with_(dist_backend="gloo"), SimpleNamespace(world_size=2, rank=0), torch.device("cuda", 0))
    assert asked[-1] == "gloo"


@pytest.mark.parametrize(
    "device, asked, backend",
    [
        (torch.device("cuda", 0), "auto", "cpu:gloo,cuda:nccl"),
        (torch.device("cuda", 3), "nccl", "cpu:gloo,cuda:nccl"),
        (torch.device("cuda", 0), "gloo", "gloo"),
        (torch.device("cpu"), "auto", "gloo"),
        (torch.device("cpu"), "gloo", "gloo"),
    ],
)
def test_process_group_backend(device, asked, backend):
    assert devices.process_group_backend(device, asked) == backend


def test_nccl_on_cpu_and_unknown_names_are_refused():
    with pytest.raises(UserError, match="CUDA tensors only"):
        devices.process_group_backend(torch.device("cpu"), "nccl")
    with pytest.raises(UserError, match="unknown dist backend 'mpi'"):
        devices.process_group_backend(torch.device("cuda", 0), "mpi")
    with pytest.raises(UserError, match="CUDA tensors only"):
        resolve(CellSpec(workload="bert-base-tiny", scheme="ddp", workers=2, device="cpu", dist_backend="nccl"))


@pytest.mark.parametrize(
    "raw, kind, used",
    [
        ("cpu:gloo,cuda:nccl", "cuda", "nccl"),
        ("cpu:gloo,cuda:nccl", "cpu", "gloo"),
        ("gloo", "cuda", "gloo"),
        ("nccl", "cuda", "nccl"),
        ("nccl", "cpu", ""),
        ("cpu:gloo", "cuda", ""),
        ("NCCL", "cuda", "nccl"),
    ],
)
def test_tensor_backend_reads_get_backend(raw, kind, used):
    assert devices.tensor_backend(raw, kind) == used


def test_a_cuda_cell_not_on_nccl_fails_unless_gloo_was_asked():
    with pytest.raises(UserError, match=r"reduce over 'gloo', not NCCL.*--dist-backend gloo"):
        devices.check_group_backend("cuda", "auto", "gloo")
    with pytest.raises(UserError, match="not NCCL"):
        devices.check_group_backend("cuda", "auto", "horovod-gloo")
    devices.check_group_backend("cuda", "gloo", "gloo")  # on purpose: allowed
    devices.check_group_backend("cuda", "auto", "nccl")
    devices.check_group_backend("cuda", "auto", "horovod-nccl")
    devices.check_group_backend("cpu", "auto", "gloo")


def test_ranks_share_one_gpu_only_over_gloo(monkeypatch):
    assert [devices.device_index(r, 1, share=True) for r in range(3)] == [0, 0, 0]
    assert [devices.device_index(r, 2, share=True) for r in range(3)] == [0, 1, 0]
    with pytest.raises(UserError, match="--dist-backend gloo"):
        devices.device_index(2, 2)
    monkeypatch.setattr(cellmod.torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(cellmod.torch.cuda, "device_count", lambda: 1)
    assert cellmod.resolve_device("cuda", 3, 1, "gloo") == "cuda"
    with pytest.raises(UserError, match="3 workers per node need 3 GPUs"):
        cellmod.resolve_device("cuda", 3, 1)


def test_cell_id_unchanged_by_the_default():
    base = CellSpec(workload="bert-base-tiny", scheme="ddp", workers=2, device="cpu")
    # the id of this cell as every run before the field computed it
    assert base.cell_id == "bert-base-tiny.ddp.torch.w2.9ab33341"
    assert base.with_(dist_backend="gloo").cell_id != base.cell_id


def test_transport_records_its_group_and_never_polls_gloo():
    """A real one-rank gloo group: the transport records dist.get_backend of its group, and its handles
    wait (gloo's CUDA works never report is_completed(): polling them hung dear and fsdp)."""
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        t = tt.TorchTransport(
            SimpleNamespace(workers=1, servers=0, knobs={}), SimpleNamespace(rank=0, node_rank=0), torch.device("cpu")
        )
        assert t.facts["dist_backend"] == "gloo"
        assert t.facts["dist_groups"] == {"workers": "gloo", "world": "gloo"}
        h = t.allreduce_async(torch.ones(4), "x")
        assert h.poll is False
        h.wait_sent()
        h.wait()
    finally:
        dist.destroy_process_group()


class _NeverCompleted:
    """A gloo CUDA work as gloo gives it: wait() returns when done, is_completed() stays False."""

    def __init__(self):
        self.waited = 0

    def is_completed(self):
        return False

    def wait(self):
        self.waited += 1


def test_a_gloo_handle_returns_credit_without_asking_completion():
    w = _NeverCompleted()
    h = handles.WorkHandle([w], poll=False)
    done = threading.Event()
    threading.Thread(target=lambda: (h.wait_sent(), done.set()), daemon=True).start()
    assert done.wait(5), "wait_sent spun on is_completed() of a gloo work"
    assert w.waited == 1


def test_a_cpu_cell_records_gloo_in_its_row(tmp_path):
    """A real 2-process cell: the summary's dist_backend is what the group used."""
    out = tmp_path / "run"
    res = CliRunner().invoke(
        cli,
        [
            "run",
            "--workload",
            "bert-base-tiny",
            "--scheme",
            "bsp-a2a",
            "--workers",
            "2",
            "--device",
            "cpu",
            "--warmup",
            "0",
            "--iters",
            "2",
            "--batch",
            "2",
            "--output",
            str(out),
        ],
    )
    assert res.exit_code == 0, res.output
    s = pd.read_parquet(out / "summary.parquet")
    assert list(s["dist_backend"]) == ["gloo"]


def test_summary_column_and_gate_key():
    assert dist_backend([{"dist_backend": "nccl"}, {"dist_backend": "nccl"}]) == "nccl"
    assert dist_backend([{"dist_backend": "nccl"}, {"dist_backend": "gloo"}]) == "gloo,nccl"
    assert dist_backend([{}]) == ""
    row = {"workload": "w", "scheme": "ddp", "backend": "torch", "workers": 2, "servers": 0, "network": "loopback"}
    old = cell_key(row)  # a run from before the column: gloo, as every earlier cell really was
    assert old == cell_key({**row, "dist_backend": "gloo"})
    assert cell_key({**row, "dist_backend": "nccl"}) != old


def _run(backend: str, status: str = "ok"):
    row = {
        "schema_version": 1,
        "run_id": "r",
        "cell_id": f"c-{backend}",
        "source": "measured",
        "status": status,
        "workload": "w",
        "sample_unit": "img",
        "scheme": "ddp",
        "backend": "torch",
        "workers": 2,
        "servers": 0,
        "batch_per_worker": 8,
        "global_batch": 16,
        "seq_len": None,
        "knobs_json": "{}",
        "network": "loopback",
        "dist_backend": backend,
        "throughput_median": 100.0,
    }
    raw = pd.DataFrame([{"cell_id": row["cell_id"], "rank": 0, "iteration": i, "iter_s": 0.16} for i in range(8)])
    return pd.DataFrame([row]), raw


def test_the_gate_never_compares_nccl_with_gloo():
    res = compare_runs(*_run("gloo"), *_run("nccl"))
    assert len(res) == 2 and "same" not in set(res["status"])  # two cells: one gone, one new
    same = compare_runs(*_run("nccl"), *_run("nccl"))
    assert list(same["status"]) == ["same"]
    assert "[nccl]" in same["cell"].iloc[0]
    # a cell that failed before joining its group (dist_backend still "auto") pairs with its measured twin
    paired = compare_runs(*_run("nccl"), *_run("auto", status="failed"))
    assert list(paired["status"]) == ["failed"]


def test_environment_table_says_what_moved_the_tensors():
    env = pd.DataFrame([{"run_id": "a", "torch": "2.13"}, {"run_id": "b", "torch": "2.13"}])
    summary = pd.DataFrame(
        [
            {"run_id": "a", "status": "ok", "dist_backend": "nccl"},
            {"run_id": "a", "status": "ok", "dist_backend": ""},
            {"run_id": "b", "status": "ok", "dist_backend": "gloo"},
        ]
    )
    table = environment_table(env, summary).set_index("field")
    assert table.loc["dist_backend", "a"] == "nccl" and table.loc["dist_backend", "b"] == "gloo"


# --- trace ends on NCCL ---------------------------------------------------------------------------


class _NcclWork:
    """An NCCL work as NCCL gives it: wait() returns at once, is_completed() turns true when the GPU is done."""

    def __init__(self, done_at: float):
        self.done_at = done_at

    def is_completed(self):
        return time.perf_counter() >= self.done_at

    def wait(self):
        return None


class _Tracer:
    def __init__(self):
        self.main = threading.current_thread()
        self.iteration = -1
        self.iters = 3
        self.completions = CompletionWatcher(poll_s=1e-3)


def test_a_traced_nccl_operation_ends_when_it_completes_not_when_wait_returns():
    tracer = _Tracer()
    t0 = time.perf_counter()
    work = _NcclWork(t0 + 0.2)
    inner = handles.WorkHandle([work], poll=True)
    rec = CommRecord("allreduce", "g0", 4096, [], 0, t0)
    follow(rec, inner, tracer.completions)
    TracedHandle(inner, rec, tracer).wait()  # returns at once, as NCCL's does
    deadline = time.perf_counter() + 5
    while rec.end is None and time.perf_counter() < deadline:
        time.sleep(0.01)
    assert rec.end_source == "completed"
    assert 0.2 <= rec.end - t0 < 0.35, rec.end - t0


def test_a_gloo_operation_still_ends_at_its_wait():
    tracer = _Tracer()
    rec = CommRecord("allreduce", "g0", 4096, [], 0, time.perf_counter())
    TracedHandle(handles.WorkHandle([_NeverCompleted()], poll=False), rec, tracer).wait()
    assert rec.end_source == "wait"


# --- profile: the cell's precision and one synchronisation per iteration ----------------------------


class _CountingClock(Clock):
    def __init__(self):
        self.syncs = 0

    def sync(self, m):
        self.syncs += 1


def test_profile_times_with_marks_and_one_sync_per_iteration(monkeypatch):
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a: pytest.fail("device-wide synchronize in a profile"))
    from harness.sim.layer_hooks import owners
    from workloads import WORKLOADS

    spec = WORKLOADS.get("bert-base-tiny")
    torch.manual_seed(0)
    model = spec.build()
    params = [p for p in model.parameters() if p.requires_grad]
    data = spec.make_batch(2, seq_len=16, device=torch.device("cpu"), seed=1)
    clock = _CountingClock()
    timing = time_iterations(
        model, spec, data, params, owners(model, params), iters=2, warmup=1, device=torch.device("cpu"), clock=clock
    )
    assert clock.syncs == 3
    assert all(r >= 0 for r in timing["ready_s"]) and timing["backward_total_s"] > 0


def test_profile_applies_the_cells_precision():
    torch.backends.cudnn.allow_tf32 = True  # torch's default: TF32 convolutions
    torch.backends.cuda.matmul.allow_tf32 = True
    df = measure_profile("resnet50-tiny", batch=2, iters=1, warmup=0, dtype="fp32")
    assert not torch.backends.cudnn.allow_tf32 and not torch.backends.cuda.matmul.allow_tf32
    assert set(df["dtype"]) == {"fp32"}
    low = measure_profile("bert-base-tiny", batch=2, seq_len=16, iters=1, warmup=0, dtype="bf16")
    assert set(low["dtype"]) == {"bf16"} and torch.backends.cudnn.allow_tf32


# --- commbench refuses what run refuses --------------------------------------------------------------


def test_commbench_refuses_two_ranks_on_one_gpu(monkeypatch, tmp_path):
    monkeypatch.setattr(cellmod.torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(cellmod.torch.cuda, "device_count", lambda: 1)
    with pytest.raises(UserError, match="2 workers per node need 2 GPUs"):
        run_commbench(
            CommbenchSpec(
                workers=2,
                min_size="4K",
                max_size="8K",
                reps=1,
                warmup=0,
                servers=0,
                output=tmp_path / "cb",
                timeout_s=60.0,
                device="cuda",
            )
        )
    assert not (tmp_path / "cb").exists()


def test_commbench_cuda_without_cuda_is_one_line_exit_2(tmp_path):
    res = CliRunner().invoke(
        cli, ["commbench", "--device", "cuda", "--workers", "2", "--max-size", "8K", "--output", str(tmp_path / "cb")]
    )
    assert res.exit_code == 2
    assert "CUDA is not available" in res.output and "Traceback" not in res.output


# --- teardown after the results are written ---------------------------------------------------------


def test_a_hung_teardown_is_left_behind():
    t0 = time.perf_counter()
    assert bounded(lambda: time.sleep(60), 0.3, "teardown") is False
    assert time.perf_counter() - t0 < 2
    assert bounded(lambda: None, 5, "teardown") is True
    with pytest.raises(RuntimeError, match="peer closed"):
        bounded(lambda: (_ for _ in ()).throw(RuntimeError("peer closed")), 5, "teardown")


# --- doctor ----------------------------------------------------------------------------------------------


def test_deepspeed_import_prints_no_accelerator_warning():
    """The first line of every CPU doctor report was DeepSpeed's 'Setting accelerator to CPU' warning."""
    pytest.importorskip("deepspeed")
    code = "from harness.backends.deepspeed.transport import versions; print(versions()['deepspeed'])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "Setting accelerator" not in out.stdout + out.stderr
