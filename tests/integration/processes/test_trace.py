"""Timelines (docs/ARCHITECTURE.md, "Traces"): `ddlbench run --trace N` writes one Chrome trace per cell with
every rank's layers, communication, waits and optimizer steps for N measured iterations; the report draws
it; tracing off installs nothing."""

from __future__ import annotations

import json
import socket
from collections import defaultdict
from types import SimpleNamespace

import pytest
import torch.optim.optimizer as optim_hooks
from click.testing import CliRunner

import harness.experiment.dispatch as dispatch  # what `ddlbench run` calls when it runs
import harness.rank.worker as worker_mod
from harness.backends.torch_dist.transport import TorchTransport
from harness.cli.main import cli
from harness.contracts.cell import CellSpec
from harness.contracts.identity import RankIdentity
from harness.core.errors import UserError
from harness.experiment.cells import resolve
from harness.experiment.sweep import expand, sweep_from_dict
from harness.measure.trace import TracedScheme
from harness.report.timeline import MAX_AUTO, find_traces, slowest_rank
from workloads import WORKLOADS
from workloads.base import grad_bytes

WORKLOAD, BATCH, TRACED = "resnet50-tiny", 2, 2


def _layers() -> tuple[set[str], int]:
    """Names of the modules that own parameters (the traced layers) and the gradient bytes."""
    model = WORKLOADS.get(WORKLOAD).build()
    names = {n for n, m in model.named_modules() if any(True for _ in m.parameters(recurse=False))}
    return names, grad_bytes(model)


def _traced_run(tmp_path, scheme: str):
    # the traced iterations end the run (what follows, the communication probe, must not be traced), except
    # for ByteScheduler, whose last traced iteration's gradients are awaited in the next forward
    iters = TRACED + 1 if scheme == "bytescheduler-a2a" else TRACED
    out = tmp_path / scheme
    res = CliRunner().invoke(
        cli,
        [
            "run",
            "--workload",
            WORKLOAD,
            "--scheme",
            scheme,
            "--workers",
            "2",
            "--device",
            "cpu",
            "--batch",
            str(BATCH),
            "--warmup",
            "1",
            "--iters",
            str(iters),
            "--trace",
            str(TRACED),
            "--oversubscribe",
            "--timeout",
            "400",
            "--output",
            str(out),
        ],
    )
    assert res.exit_code == 0, res.output
    [path] = list((out / "cells").glob("*/trace.json"))
    return out, path.parent.name, json.loads(path.read_text())


def _by_rank(trace: dict) -> dict[int, list[dict]]:
    out = defaultdict(list)
    for e in trace["traceEvents"]:
        if e["ph"] == "X":
            out[e["pid"]].append(e)
    return out


@pytest.mark.parametrize("scheme", ["wfbp-a2a", "bytescheduler-a2a", "ddp"])
def test_traced_run_writes_every_rank_timeline(tmp_path, scheme):
    """ddp: its buckets are traced through a comm hook, not the transport."""
    run_dir, cell_id, trace = _traced_run(tmp_path, scheme)
    layers, gbytes = _layers()
    assert trace["otherData"]["cell_id"] == cell_id and trace["otherData"]["trace_iters"] == TRACED
    assert "barrier" in trace["otherData"]["clock"] and "earliest completion" in trace["otherData"]["end"]
    ranks = _by_rank(trace)
    assert sorted(ranks) == [0, 1]
    for rank, evs in ranks.items():
        iters = sorted((e for e in evs if e["cat"] == "iteration"), key=lambda e: e["ts"])
        assert [e["args"]["iteration"] for e in iters] == list(range(TRACED))  # only the traced ones
        bounds = [(e["ts"], e["ts"] + e["dur"]) for e in iters]
        comm = [e for e in evs if e["cat"] == "comm" and e["args"]["op"] in ("allreduce", "push_pull")]
        for i, (t0, t1) in enumerate(bounds):
            fwd = {e["args"]["layer"] for e in evs if e["name"].startswith("fwd ") and e["args"]["iteration"] == i}
            bwd = {e["args"]["layer"] for e in evs if e["name"].startswith("bwd ") and e["args"]["iteration"] == i}
            assert fwd == layers and bwd == layers, (rank, i, layers ^ fwd, layers ^ bwd)
            for e in evs:  # layers and phases of iteration i lie inside it
                if e["tid"] == 1 and e["cat"] in ("layer", "phase") and e["args"]["iteration"] == i:
                    assert t0 <= e["ts"] and e["ts"] + e["dur"] <= t1 + 1, e
            mine = [e for e in comm if e["args"]["iteration"] == i]
            assert sum(e["args"]["bytes"] for e in mine) == gbytes  # every gradient byte, once
            assert all(e["args"]["tensors"] for e in mine)  # which gradients each operation carried
            # communication starts in its iteration's backward and ends before the gradients are used:
            # at the optimizer step (WFBP) or in the next forward's pre-hook (ByteScheduler)
            if scheme != "bytescheduler-a2a":
                limit = t1
            else:
                limit = max(
                    e["ts"] + e["dur"]
                    for e in evs
                    if e["name"].startswith("pre-hook wait") and e["args"]["iteration"] == i + 1
                )
            for e in mine:
                assert t0 <= e["ts"] and e["ts"] + e["dur"] <= limit + 1, (e, t0, limit)
        assert all(e["args"]["iteration"] < TRACED for e in comm)
        steps = [e for e in evs if e["name"] == "optimizer.step"]
        if scheme != "bytescheduler-a2a":
            assert [e["args"]["iteration"] for e in steps] == list(range(TRACED))
            assert {e["name"] for e in evs if e["tid"] == 2} >= {"comm_wait"}
        else:  # one update per layer in the next forward's pre-hooks, each after its wait
            per_iter = defaultdict(int)
            for e in steps:
                per_iter[e["args"]["iteration"]] += 1
            assert all(per_iter[i] == len(layers) for i in range(1, TRACED + 1)), dict(per_iter)
            assert any(e["args"]["thread"] == "bytescheduler" for e in comm)
    assert slowest_rank(trace) in (0, 1)
    if scheme == "wfbp-a2a":  # the report draws it
        rep = tmp_path / "report"
        res = CliRunner().invoke(cli, ["report", str(run_dir), "-o", str(rep), "--timeline", cell_id])
        assert res.exit_code == 0, res.output
        assert (rep / "timeline-1.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert "timeline-1.png" in (rep / "report.md").read_text()
        bad = CliRunner().invoke(cli, ["report", str(run_dir), "-o", str(tmp_path / "r2"), "--timeline", "nope"])
        assert bad.exit_code == 2 and cell_id in bad.output


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("scheme", ["local", "wfbp-a2a"])
def test_tracing_off_installs_nothing(tmp_path, monkeypatch, scheme):
    """Untraced: the loop gets the scheme itself, the scheme the backend's own transport, no module has
    a forward hook, no optimizer hook exists, and no trace file is written."""
    seen = {}

    def spy(model, scheme_obj, loss_fn, batch, warmup, iters, device, barrier, fault=None):
        seen["scheme"] = scheme_obj
        seen["transport"] = scheme_obj.ctx.transport
        seen["module_hooks"] = sum(len(m._forward_pre_hooks) + len(m._forward_hooks) for m in model.modules())
        seen["optimizer_hooks"] = len(optim_hooks._global_optimizer_pre_hooks) + len(
            optim_hooks._global_optimizer_post_hooks
        )
        return real(model, scheme_obj, loss_fn, batch, warmup, iters, device, barrier, fault)

    real = worker_mod.run_loop
    monkeypatch.setattr(worker_mod, "run_loop", spy)
    cell = resolve(CellSpec(workload=WORKLOAD, scheme=scheme, workers=1, device="cpu", batch=BATCH, warmup=1, iters=2))
    me = RankIdentity(
        rank=0, world_size=1, local_rank=0, local_world_size=1, master_addr="127.0.0.1", master_port=_free_port()
    )
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    assert worker_mod.run_worker(cell, me, tmp_path) is not None
    assert not isinstance(seen["scheme"], TracedScheme)
    assert seen["transport"] is None or type(seen["transport"]) is TorchTransport
    assert seen["module_hooks"] == 0 and seen["optimizer_hooks"] == 0
    assert not (tmp_path / "trace.json").exists()


def test_traced_local_cell_removes_its_hooks_and_keeps_the_id(tmp_path, monkeypatch):
    seen = {}
    real = worker_mod.run_loop

    def spy(model, scheme_obj, *args):
        out = real(model, scheme_obj, *args)
        seen["traced"] = isinstance(scheme_obj, TracedScheme)
        seen["after"] = sum(len(m._forward_pre_hooks) + len(m._forward_hooks) for m in model.modules())
        return out

    monkeypatch.setattr(worker_mod, "run_loop", spy)
    cell = resolve(
        CellSpec(
            workload=WORKLOAD, scheme="local", workers=1, device="cpu", batch=BATCH, warmup=1, iters=3, trace_iters=2
        )
    )
    assert cell.cell_id == cell.with_(trace_iters=0).cell_id  # resume finds traced and untraced cells alike
    me = RankIdentity(rank=0, world_size=1, local_rank=0, local_world_size=1, master_addr="127.0.0.1", master_port=0)
    worker_mod.run_worker(cell, me, tmp_path)
    assert seen == {"traced": True, "after": 0}
    trace = json.loads((tmp_path / "trace.json").read_text())
    assert sum(e.get("cat") == "iteration" for e in trace["traceEvents"]) == 2
    assert not any(e.get("cat") == "comm" for e in trace["traceEvents"])


def test_sweep_trace_key_reaches_cells_without_changing_ids():
    base = {"workloads": [WORKLOAD], "schemes": ["wfbp-a2a"], "workers": [2], "device": "cpu"}
    plain = expand(sweep_from_dict(base))
    traced = expand(sweep_from_dict({**base, "trace": 3}))
    assert [c.cell_id for c in plain] == [c.cell_id for c in traced]
    assert {c.trace_iters for c in traced} == {3} and {c.trace_iters for c in plain} == {0}


@pytest.mark.parametrize("args, want", [([], 0), (["--trace"], 3), (["--trace", "5"], 5)])
def test_trace_option_reaches_the_cell(monkeypatch, args, want):
    seen = {}

    def fake(cell, *a, **k):
        seen["cell"] = cell
        raise UserError("stop here")

    monkeypatch.setattr(dispatch, "run_cell", fake)
    res = CliRunner().invoke(cli, ["run", "--workload", WORKLOAD, "--scheme", "wfbp-a2a", *args])
    assert res.exit_code == 2 and seen["cell"].trace_iters == want
    bad = CliRunner().invoke(cli, ["run", "--workload", WORKLOAD, "--trace", "0"])
    assert bad.exit_code == 2


def test_timeline_all_chooses_every_traced_cell_beyond_the_default_few(tmp_path):
    """`report --timeline all` draws every traced cell (the showcase's six), not the default first few."""
    ids = [f"cell-{k}" for k in range(MAX_AUTO + 2)]
    for c in ids:
        (tmp_path / "cells" / c).mkdir(parents=True)
        (tmp_path / "cells" / c / "trace.json").write_text("{}")
    (tmp_path / "cells" / "untraced").mkdir()
    run = SimpleNamespace(path=tmp_path)
    assert [c for c, _ in find_traces([run], [])] == ids[:MAX_AUTO]
    assert [c for c, _ in find_traces([run], ["all"])] == ids
