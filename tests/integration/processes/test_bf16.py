"""bf16 is lossless too (docs/ARCHITECTURE.md, "Precision"): after k steps in a bf16 cell the parameters on
every rank are bitwise identical, and equal within bf16 tolerance to single-process training under the
same autocast (forward and loss under torch.autocast(cpu, bfloat16), fp32 master parameters, the one SGD).

Each case is a real 2-worker run through the harness's launcher (gloo over loopback) with DDLBENCH_STEPS
and DDLBENCH_DUMP_PARAMS, as tests/integration/processes/test_lossless.py. bf16 rounds every matmul's result to 8
significant bits, and the single process sums the batch in another order than two ranks do, so the parameters cannot
be equal to fp32 tolerance: the measure is the discrepancy relative to how far training moved each tensor,
and a control shows that the tolerance still catches a lossy method (ranks that never exchange gradients).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import torch

from harness.contracts.backend import BACKENDS
from harness.contracts.cell import CellSpec
from harness.contracts.training import autocast_loss, make_optimizer
from harness.core.errors import UserError
from harness.experiment.cells import resolve
from harness.experiment.sweep import expand, sweep_from_dict
from harness.launchers.local.launcher import launch_one_box
from harness.schemes import SCHEMES
from helpers import SMALL, STEPS, initial
from workloads import WORKLOADS

TOL = 5e-2
"""Allowed discrepancy per tensor as a fraction of the distance training moved it: bf16 rounding of the
same computation summed in another order stays well under it; a dropped or unshared gradient is of the
order of the movement itself (the control below)."""


def reference_bf16(workload: str, shards_used: int, workers: int, batch: int, seq_len, steps: int) -> dict:
    """Single-process training under autocast on the global batch of `workers` ranks; `shards_used` < workers
    trains on only the first shards (what a rank that never hears from its peers computes: the control)."""
    torch.set_num_threads(1)
    spec = WORKLOADS.get(workload)
    torch.manual_seed(0)
    model = spec.build()
    model.train()
    opt = make_optimizer([p for p in model.parameters() if p.requires_grad])
    loss_fn = autocast_loss(spec.loss, "bf16", torch.device("cpu"))
    shards = [spec.make_batch(batch, seq_len=seq_len, device="cpu", seed=1000 + r) for r in range(shards_used)]
    for _ in range(steps):
        if spec.per_sample_norm:
            whole = {k: torch.cat([s[k] for s in shards]) for k in shards[0]}
            loss_fn(model, whole).backward()
        else:
            for s in shards:
                (loss_fn(model, s) / len(shards)).backward()
        opt.step()
        opt.zero_grad()
    return {n: p.detach() for n, p in model.named_parameters()}


def run_bf16(tmp_path, monkeypatch, cell: CellSpec) -> tuple[list[dict], dict]:
    """(each rank's final parameters, rank 0's result.json) of a real run through the backend's own launch program
    (ours for torch, horovodrun, the deepspeed launch program)."""
    monkeypatch.setenv("DDLBENCH_STEPS", str(STEPS))
    monkeypatch.setenv("DDLBENCH_DUMP_PARAMS", "1")
    cell = resolve(cell)
    d = tmp_path / cell.cell_id
    result = json.loads(Path(launch_one_box(cell, d, None)).read_text())
    return [torch.load(d / f"params.rank{r}.pt") for r in range(cell.workers)], result


def need(backend: str) -> None:
    reason = BACKENDS.get(backend).available()
    if reason:
        pytest.skip(f"FRAMEWORK MISSING: {reason}")


def same_on_every_rank(params: list[dict]) -> None:
    for r, other in enumerate(params[1:], start=1):
        for name, t in params[0].items():
            assert torch.equal(t, other[name]), f"rank {r} differs from rank 0 in {name}"


FLOOR = 1e-6
"""Norm below which a tensor counts as unmoved: BERT's attention key bias has an exactly zero gradient in
exact arithmetic (softmax ignores a shift shared by all keys), so it moves by float noise (~1e-9) only."""


def worst_offset(params: dict, ref: dict, init: dict) -> tuple[float, str]:
    """The largest per-tensor |params - ref| / (|ref - init| + FLOOR) and the tensor it is in."""
    worst, where = 0.0, ""
    for name, t in params.items():
        moved = (ref[name] - init[name]).norm()
        assert moved > 0, f"{name} did not train"
        off = float((t - ref[name]).norm() / (moved + FLOOR))
        if off > worst:
            worst, where = off, name
    return worst, where


CASES = [
    ("ddp", "torch", "bert-base-tiny"),
    ("wfbp-a2a", "torch", "bert-base-tiny"),
    ("wfbp-a2a", "torch", "resnet50-tiny"),
    ("horovod", "horovod", "bert-base-tiny"),
]
if "fsdp" in SCHEMES:  # FSDP2 with its MixedPrecisionPolicy, once registered
    CASES.append(("fsdp", "torch", "bert-base-tiny"))


@pytest.mark.slow
@pytest.mark.parametrize("scheme, backend, workload", CASES, ids=[f"{s}-{w}" for s, _, w in CASES])
def test_bf16_lossless_two_workers(scheme, backend, workload, tmp_path, monkeypatch):
    need(backend)
    shape = SMALL[workload]
    cell = CellSpec(
        workload=workload, scheme=scheme, backend=backend, workers=2, device="cpu", dtype="bf16", timeout_s=420, **shape
    )
    params, result = run_bf16(tmp_path, monkeypatch, cell)
    plan = result["plan"]
    assert plan["dtype"] == "bf16" and plan["reduce_dtype"] == "fp32", plan
    same_on_every_rank(params)
    assert all(t.dtype == torch.float32 for t in params[0].values()), "master parameters are not fp32"
    init = initial(workload)
    ref = reference_bf16(workload, 2, 2, shape["batch"], shape.get("seq_len"), STEPS)
    assert set(params[0]) == set(ref)
    worst, where = worst_offset(params[0], ref, init)
    assert worst <= TOL, f"{where}: off by {worst:.3g} of how far training moved it (bf16 tolerance {TOL})"
    # the tolerance tells lossless from lossy: rank 0 alone (no gradient exchange) is far outside it
    alone, _ = worst_offset(reference_bf16(workload, 1, 2, shape["batch"], shape.get("seq_len"), STEPS), ref, init)
    assert alone > 4 * TOL, f"the control is within {alone:.3g}: the tolerance would not catch a lossy method"


@pytest.mark.slow
def test_deepspeed_bf16_mode_reduces_in_bf16(tmp_path, monkeypatch):
    """zero2 in a bf16 cell runs DeepSpeed's own bf16 section: a bf16 module (its fp32 master starts from the
    bf16-rounded weights, so it is not compared with the autocast reference), gradients reduced in bf16
    (half the fp32 bytes), and the same parameters on every rank."""
    need("deepspeed")
    cell = CellSpec(
        workload="bert-base-tiny",
        scheme="zero2",
        backend="deepspeed",
        workers=2,
        device="cpu",
        dtype="bf16",
        timeout_s=420,
        **SMALL["bert-base-tiny"],
    )
    params, result = run_bf16(tmp_path, monkeypatch, cell)
    assert result["plan"]["reduce_dtype"] == "bf16" and result["plan"]["dtype"] == "bf16", result["plan"]
    assert result["facts"]["comm_bytes_per_iter"] * 2 == result["facts"]["grad_bytes"]
    same_on_every_rank(params)
    init = initial("bert-base-tiny")
    assert all(t.dtype == torch.bfloat16 for t in params[0].values())
    assert any(not torch.equal(t.float(), init[n].bfloat16().float()) for n, t in params[0].items()), "nothing trained"


@pytest.fixture
def fp32_only(monkeypatch):
    """A scheme registered as fp32-only (no shipped scheme refuses bf16 today: every torch scheme reduces the
    fp32 .grad autocast leaves, DeepSpeed and FSDP2 bring their own bf16 modes)."""
    entry = dataclasses.replace(SCHEMES.get("bsp-a2a"), name="fp32-only", dtypes=("fp32",))
    monkeypatch.setitem(SCHEMES._entries, "fp32-only", entry)
    return entry


def test_a_scheme_that_cannot_run_bf16_is_refused_in_one_line(fp32_only):
    with pytest.raises(UserError, match=r"scheme 'fp32-only' cannot run bf16: it runs fp32; use --dtype fp32"):
        resolve(CellSpec(workload="bert-base-tiny", scheme="fp32-only", workers=2, device="cpu", dtype="bf16"))
    assert resolve(CellSpec(workload="bert-base-tiny", scheme="fp32-only", workers=2, device="cpu")).dtype == "fp32"


def test_sweep_dtype_axis(fp32_only):
    """`dtype:` expands like the other lists: each dtype has its own baseline and cell ids, a scheme runs only
    the dtypes it supports, and one that runs none of the sweep's is an error, not a silent gap."""
    cfg = sweep_from_dict(
        {
            "workloads": ["bert-base-tiny"],
            "schemes": ["ddp", "fp32-only"],
            "workers": [2],
            "device": "cpu",
            "dtype": ["fp32", "bf16"],
        }
    )
    cells = {(c.scheme, c.dtype): c.cell_id for c in expand(cfg)}
    assert set(cells) == {("local", "fp32"), ("local", "bf16"), ("ddp", "fp32"), ("ddp", "bf16"), ("fp32-only", "fp32")}
    assert len(set(cells.values())) == len(cells)
    assert ".bf16." in cells[("ddp", "bf16")] and ".bf16." not in cells[("ddp", "fp32")]
    with pytest.raises(UserError, match="runs none of the sweep's dtypes"):
        expand(
            sweep_from_dict(
                {"workloads": ["bert-base-tiny"], "schemes": ["fp32-only"], "dtype": "bf16", "device": "cpu"}
            )
        )


def test_fp32_cells_keep_their_ids():
    """Adding the dtype axis did not change the id of any fp32 cell (resume and baselines rely on them)."""
    cell = CellSpec(workload="bert-base-tiny", scheme="ddp", workers=2)
    assert cell.cell_id.rsplit(".", 1)[0] == "bert-base-tiny.ddp.torch.w2"
    assert cell.with_(dtype="bf16").cell_id.rsplit(".", 1)[0] == "bert-base-tiny.ddp.torch.w2.bf16"
