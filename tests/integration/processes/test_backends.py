"""Backends horovod, deepspeed and byteps (docs/ARCHITECTURE.md, "Backend").

Lossless, the way tests/integration/processes/test_lossless.py means it (ranks bitwise identical after k steps, and
equal to one process training on the concatenated global batch), for every scheme on the real frameworks, each cell
started the way the framework's users start jobs (horovodrun --gloo; the deepspeed launch program):
    horovod   x {horovod (fusion on; fusion_threshold_mb=0), bsp-a2a, wfbp-a2a, mgwfbp, bytescheduler-a2a}
    deepspeed x {zero0, zero1, zero2, zero3}
BytePS cannot be installed here: its role environment and Slurm layout are checked as pure functions, and
`ddlbench run --backend byteps` must stop with one line and exit status 2.

A missing framework skips loudly with the install command; under CI=true with
DDLBENCH_REQUIRE_FRAMEWORKS=1 it fails instead (as tests/integration/processes/test_frameworks_install.py).
"""

from __future__ import annotations

import functools
import os

import pytest
import torch
from click.testing import CliRunner

import helpers as _lossless  # the lossless check (tests/helpers.py)
from harness.backends.byteps import byteps_role_env, slurm_layout
from harness.contracts.backend import BACKENDS
from harness.contracts.cell import CellSpec
from harness.core.errors import UserError
from harness.experiment.cells import resolve
from helpers import SMALL, check, must_have, run_backend

STEPS = int(os.environ.get("LOSSLESS_STEPS", "5"))  # > the bucketed schemes' 2 profiling iterations
ZERO_STEPS = 3  # ZeRO has no profiling phase; fewer steps keep the file's wall time down


@functools.cache
def reference(workload: str, workers: int, batch: int, seq_len, steps: int):
    with torch.random.fork_rng():
        return _lossless.reference(workload, workers, batch, seq_len, steps)


def bert_cell(backend: str, scheme: str, knobs: dict | None = None) -> CellSpec:
    return CellSpec(
        workload="bert-base-tiny",
        scheme=scheme,
        backend=backend,
        workers=2,
        device="cpu",
        knobs=knobs or {},
        timeout_s=420,
        **SMALL["bert-base-tiny"],
    )


# ------------------------------------------------------------------------------------------------ horovod
HOROVOD_CASES = [
    ("horovod", {}),  # Horovod's defaults: fusion on (128 MB), 1 ms cycle
    ("horovod", {"fusion_threshold_mb": 0}),  # fusion off: one all-reduce per tensor
    ("bsp-a2a", {}),
    ("wfbp-a2a", {}),
    ("mgwfbp", {}),
    ("bytescheduler-a2a", {"partition_mb": 1.0, "credit_mb": 2.0}),
]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("scheme", "knobs"),
    HOROVOD_CASES,
    ids=[f"{s}-{'-'.join(f'{k}{v}' for k, v in kn.items()) or 'default'}" for s, kn in HOROVOD_CASES],
)
def test_horovod_lossless(scheme, knobs, tmp_path, monkeypatch):
    must_have("horovod")
    params, result = run_backend(tmp_path, monkeypatch, bert_cell("horovod", scheme, knobs), STEPS)
    check(params, reference("bert-base-tiny", 2, 2, 16, STEPS), "bert-base-tiny")
    assert result["versions"]["horovod"] == "0.28.1"
    assert result["dist"]["source"] == "horovodrun"
    if scheme == "horovod":  # the knobs reached Horovod through horovodrun's flags
        mb = knobs.get("fusion_threshold_mb", 128)
        assert result["plan"]["HOROVOD_FUSION_THRESHOLD"] == str(mb * (1 << 20))


# ------------------------------------------------------------------------------------------------ deepspeed
@pytest.mark.slow
@pytest.mark.parametrize("stage", [0, 1, 2, 3])
def test_deepspeed_zero_lossless(stage, tmp_path, monkeypatch):
    must_have("deepspeed")
    knobs = {} if stage == 0 else {"reduce_bucket_mb": 1.0, "overlap_comm": 1}  # small buckets: several
    params, result = run_backend(tmp_path, monkeypatch, bert_cell("deepspeed", f"zero{stage}", knobs), ZERO_STEPS)
    check(params, reference("bert-base-tiny", 2, 2, 16, ZERO_STEPS), "bert-base-tiny")
    assert result["plan"]["zero_stage"] == stage
    assert result["dist"]["source"] == "deepspeed"
    assert result["versions"]["deepspeed"]
    if stage:
        assert result["plan"]["reduce_bucket_size"] == (1 << 20) // 4 and result["plan"]["overlap_comm"]


# ------------------------------------------------------------------------------------------------ byteps
def test_byteps_role_env():
    w = byteps_role_env("worker", 4, 2, "node0", 1234, worker_id=3, local_rank=1, local_size=2)
    assert w == {
        "DMLC_ROLE": "worker",
        "DMLC_NUM_WORKER": "4",
        "DMLC_NUM_SERVER": "2",
        "DMLC_PS_ROOT_URI": "node0",
        "DMLC_PS_ROOT_PORT": "1234",
        "DMLC_WORKER_ID": "3",
        "BYTEPS_LOCAL_RANK": "1",
        "BYTEPS_LOCAL_SIZE": "2",
    }
    s = byteps_role_env("server", 4, 2, "node0", 1234)
    assert s["DMLC_ROLE"] == "server" and "DMLC_WORKER_ID" not in s
    assert byteps_role_env("scheduler", 4, 2, "node0", 1234)["DMLC_ROLE"] == "scheduler"
    for bad in (dict(role="client"), dict(role="worker", worker_id=4), dict(role="server", num_servers=0)):
        args = dict(role="worker", num_workers=4, num_servers=2, scheduler_host="h", scheduler_port=1) | bad
        with pytest.raises(UserError):
            byteps_role_env(**args)


def test_byteps_slurm_layout_scheduler_on_node0_servers_on_their_own_nodes():
    nodes = ["n0", "n1", "n2", "n3", "n4"]
    procs = slurm_layout(nodes, workers_per_node=2, num_servers=2, server_nodes=1)
    assert [p.node for p in procs if p.role == "scheduler"] == [0]
    assert {p.node for p in procs if p.role == "server"} == {4}
    workers = [p for p in procs if p.role == "worker"]
    assert len(workers) == 8 and {p.node for p in workers} == {0, 1, 2, 3}
    assert {p.env["DMLC_NUM_WORKER"] for p in procs} == {"4"}  # worker machines
    assert {p.env["DMLC_PS_ROOT_URI"] for p in procs} == {"n0"}
    assert sorted({p.env["DMLC_WORKER_ID"] for p in workers}) == ["0", "1", "2", "3"]
    colocated = slurm_layout(nodes[:2], workers_per_node=1, num_servers=2)
    assert [p.node for p in colocated if p.role == "server"] == [0, 1]
    with pytest.raises(UserError):
        slurm_layout(nodes[:1], 1, 1, server_nodes=1)


def test_byteps_run_fails_with_one_line_and_exit_2(tmp_path):
    if BACKENDS.get("byteps").available() is None:
        pytest.skip("BytePS is importable here: the refusal is not what this machine does")
    from harness.cli.main import cli

    for scheme in ("byteps", "bsp-a2a"):  # its own scheme, and one it does not list: the same refusal
        res = CliRunner().invoke(
            cli,
            [
                "run",
                "--workload",
                "bert-base-tiny",
                "--scheme",
                scheme,
                "--backend",
                "byteps",
                "--workers",
                "2",
                "--device",
                "cpu",
                "--no-baseline",
                "--output",
                str(tmp_path / scheme),
            ],
        )
        assert res.exit_code == 2, res.output
        lines = [ln for ln in res.output.splitlines() if ln.strip()]
        assert len(lines) == 1, res.output
        assert "byteps" in lines[0] and "CUDA" in lines[0] and "NCCL" in lines[0]
        assert not (tmp_path / scheme / "cells").exists()  # nothing ran, nothing fell back


def test_unavailable_backend_is_refused_at_resolve(monkeypatch):
    """resolve() asks every backend's available(): the sweep and run commands cannot start a cell on one."""
    from dataclasses import replace

    entry = BACKENDS.get("horovod")
    monkeypatch.setitem(
        BACKENDS._entries, "horovod", replace(entry, available=lambda: "no horovod here; install: bash x.sh")
    )
    with pytest.raises(UserError, match="no horovod here"):
        resolve(bert_cell("horovod", "bsp-a2a"))


def test_byteps_gathers_objects_with_sums_only():
    """BytePS has no allgather: gather_object goes through two push-pull sums (lengths, then rows)."""
    import threading

    from harness.backends.byteps.transport import gather_by_sum

    workers, box, lock = 3, {}, threading.Lock()
    barrier = threading.Barrier(workers)
    out = [None] * workers

    def total(t, what):  # an in-place sum over the three "ranks" (threads)
        with lock:
            box.setdefault(what, []).append(t.clone())
        barrier.wait()
        t.copy_(sum(box[what]))
        barrier.wait()

    def rank(r):
        out[r] = gather_by_sum({"rank": r, "samples": [0.5] * r, "host": "nœud"}, r, workers, total)

    threads = [threading.Thread(target=rank, args=(r,)) for r in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    expected = [{"rank": r, "samples": [0.5] * r, "host": "nœud"} for r in range(workers)]
    assert out == [expected] * workers


def test_horovod_without_nccl_refuses_cuda_cells():
    """CPU-only Horovod (this machine's) must not run CUDA cells through host copies; CPU cells are fine."""
    entry = BACKENDS.get("horovod")
    if entry.available() is not None:
        pytest.skip(entry.available())
    import horovod.torch as hvd

    assert entry.device_check("cpu") is None
    why = entry.device_check("cuda")
    assert (why is None) == bool(hvd.nccl_built())
    if why:
        assert "HOROVOD_GPU_OPERATIONS=NCCL" in why and "\n" not in why


def test_credit_returns_only_when_the_operation_has_finished():
    """NCCL's Work.wait() returns at once (it only orders streams); the credit window must ask
    is_completed() instead, or every partition is sent together. A fake work that finishes after 3 polls."""
    from harness.backends.torch_dist.handles import WorkHandle

    class Work:
        polls = 0

        def is_completed(self):
            Work.polls += 1
            return Work.polls > 3

        def wait(self):
            assert Work.polls > 3, "waited before the operation finished"

    h = WorkHandle([Work()], poll=True)
    h.wait_sent()
    assert Work.polls == 4 and h.works == ()
