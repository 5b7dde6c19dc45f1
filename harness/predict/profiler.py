"""Per-layer profile of one worker: forward and backward time per parameter tensor, measured on this
device, plus FLOPs and memory traffic counted per layer. The predictor's compute input.

    ddlbench profile bert-base-tiny --iters 10 -o prof.parquet

Two passes over the same model and batch. The totals (forward, backward, optimizer) come from the harness's
own timing loop (harness/measure/loop.py with the `local` scheme): no hook, no Python work per layer and no
synchronisation inside the window, so they are what a cell measures. How each total divides among the layers
comes from a second pass with hooks: a forward pre-hook on every module that owns parameters (the same owners
ByteScheduler's engine hooks) stamps the clock, and the time from one owner's start to the next owner's start
is charged to the first (so the non-parameter work after a layer, and the loss, belong to it); a
post-accumulate-grad hook per tensor stamps when its gradient is ready, relative to the start of backward (as
harness.schemes.bucketed profiles it). The hooks' shares are scaled to the loop's totals (`scaled`). Why: on a
GPU whose pace is the host's, about 800 hooks of Python work doubled bert-large's iteration (batch 8, an H200,
reports/gpu/2026-11-26-h200-after): a profile timed with them alone charges the hooks' host time to the layers.
What remains: where hooks slow the host, each layer's share is its share of the hooked iteration. FLOPs:
torch.utils.flop_counter's formulas, charged to the same intervals (forward: the running owner; backward: the
next gradient to become ready), counted on a `meta` copy of the model so counting costs no compute.
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import statistics
from pathlib import Path

import pandas as pd
import torch

from harness.contracts.training import (
    DTYPES,
    autocast_loss,
    make_optimizer,
    set_precision,
)
from harness.core.atomic import write_parquet_atomic
from harness.core.errors import UserError
from harness.experiment.cells import check_shape
from harness.measure import host_heap
from harness.measure.loop import run_loop
from harness.measure.timer import Clock, make_clock
from harness.predict.flop_count import count_costs
from harness.predict.profile_table import build_table
from harness.results.files import check_output_file
from harness.schemes import SCHEMES, SchemeContext
from harness.sim.layer_hooks import LayerHooks, charge_forward, forward_order_of, owners
from workloads import WORKLOADS


def time_iterations(
    model,
    spec,
    data,
    params,
    own,
    iters: int,
    warmup: int,
    device: torch.device,
    reduce: str = "median",
    loss_fn=None,
    clock: Clock | None = None,
):
    """Run warmup + iters training iterations; median (or mean) forward seconds per owner, ready seconds
    per tensor, backward and optimizer seconds, and the owners' forward order.

    Timed as a cell's loop times (harness/measure/timer.py): every stamp is a mark of `clock` (CUDA events
    on the compute stream on GPU, taken in the hooks without synchronising anything), and each iteration
    synchronises once, on its last mark. `loss_fn` carries the cell's precision (autocast for bf16)."""
    loss_fn = loss_fn or spec.loss
    clock = clock or make_clock(device)
    opt = make_optimizer(params)
    hooks = LayerHooks(own, params)
    fwd_runs, ready_runs, bwd_runs, opt_runs = [], [], [], []
    layer_marks: list = []
    ready_marks: list = [None] * len(params)
    hooks.on_layer = lambda j: layer_marks.append((clock.mark(), j))

    def on_ready(i):
        ready_marks[i] = clock.mark()

    hooks.on_ready = on_ready
    try:
        for it in range(warmup + iters):
            layer_marks.clear()
            ready_marks[:] = [None] * len(params)
            m0 = clock.mark()
            loss = loss_fn(model, data)
            m1 = clock.mark()
            loss.backward()
            m2 = clock.mark()
            opt.step()
            opt.zero_grad(set_to_none=True)  # as a user's loop and the `local` baseline free them
            m3 = clock.mark()
            clock.sync(m3)  # the one synchronisation of the iteration
            if it < warmup:
                continue
            sec = lambda m: clock.elapsed(m0, m)  # noqa: B023 - used at once, in this iteration
            t1, t2, t3 = sec(m1), sec(m2), sec(m3)
            events = [(sec(m), j) for m, j in layer_marks]
            fwd_runs.append(charge_forward(events, 0.0, t1, len(own)))
            # a tensor never ready counts as ready at the end of backward
            ready_runs.append([t2 - t1 if m is None else sec(m) - t1 for m in ready_marks])
            bwd_runs.append(t2 - t1)
            opt_runs.append(t3 - t2)
            order = forward_order_of(events, len(own))
    finally:
        hooks.remove()
    stat = statistics.mean if reduce == "mean" else statistics.median
    med = lambda runs: [stat(r[k] for r in runs) for k in range(len(runs[0]))]
    return {
        "layer_forward_s": med(fwd_runs),
        "ready_s": med(ready_runs),
        "backward_total_s": stat(bwd_runs),
        "optimizer_s": stat(opt_runs),
        "forward_order": order,
    }


def loop_totals(model, data, iters: int, warmup: int, device: torch.device, loss_fn, reduce: str = "median") -> dict:
    """Forward, backward and optimizer seconds per iteration (median, or mean) of the harness's own timing loop
    with the `local` scheme on this model and batch: no per-layer hook, nothing waiting for the device inside
    the window (harness/measure/loop.py)."""
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
    samples = run_loop(fwd, scheme, loss_fn, data, warmup, iters, device, lambda: None)
    stat = statistics.mean if reduce == "mean" else statistics.median
    return {
        "forward_s": stat(s["forward_s"] + s["forward_wait_s"] for s in samples),
        "backward_s": stat(s["backward_s"] + s["comm_wait_s"] for s in samples),
        "optimizer_s": stat(s["optimizer_s"] for s in samples),
    }


def scaled(timing: dict, totals: dict) -> dict:
    """The hooked pass's per-layer times (time_iterations) scaled so that forward, backward and optimizer add up
    to the loop's totals (loop_totals): each layer keeps its share of its phase, gradients their order and
    their readiness as a share of backward. Pure."""
    fwd = sum(timing["layer_forward_s"])
    f = totals["forward_s"] / fwd if fwd > 0 else 1.0
    b = totals["backward_s"] / timing["backward_total_s"] if timing["backward_total_s"] > 0 else 1.0
    return {
        **timing,
        "layer_forward_s": [t * f for t in timing["layer_forward_s"]],
        "ready_s": [t * b for t in timing["ready_s"]],
        "backward_total_s": timing["backward_total_s"] * b,
        "optimizer_s": totals["optimizer_s"],
    }


def _load_loop(workload: str, batch: int, seq_len, threads: int, device: str, stop, started) -> None:
    """A training loop with nothing measured: the load of one more worker computing beside the one
    being profiled (`concurrent` > 1). Runs until `stop` is set."""
    spec = WORKLOADS.get(workload)
    dev = torch.device(device)
    if dev.type == "cpu":
        torch.set_num_threads(threads)
        host_heap.keep()  # as the worker it stands for (harness/measure/host_heap.py)
    torch.manual_seed(1)
    model = spec.build().to(dev)
    model.train()
    opt = make_optimizer([p for p in model.parameters() if p.requires_grad])
    data = spec.make_batch(batch, seq_len=seq_len, device=dev, seed=1001)
    first = True
    while not stop.is_set():
        opt.zero_grad(set_to_none=True)
        spec.loss(model, data).backward()
        opt.step()
        if first:
            started.release()
            first = False


@contextlib.contextmanager
def _load_copies(copies: int, workload: str, batch: int, seq_len, threads: int, device: str):
    """`copies` processes running the same training loop (`_load_loop`) for the duration of the block,
    every one of them past its first iteration before the block starts."""
    if copies < 1:
        yield
        return
    ctx = mp.get_context("spawn")
    stop, started = ctx.Event(), ctx.Semaphore(0)
    loads = [
        ctx.Process(target=_load_loop, daemon=True, args=(workload, batch, seq_len, threads, device, stop, started))
        for _ in range(copies)
    ]
    for p in loads:
        p.start()
    try:
        for _ in loads:
            if not started.acquire(timeout=600):
                raise RuntimeError("a load copy did not finish its first iteration in 600 s")
        yield
    finally:
        stop.set()
        for p in loads:  # load and nothing else: ended now, not after their iteration (or their imports, when
            p.kill()  # the block is left early: a SIGTERM would otherwise wait for a copy still starting up)
        for p in loads:
            p.join(timeout=30)


def measure_profile(
    workload: str,
    batch: int | None = None,
    seq_len: int | None = None,
    iters: int = 5,
    warmup: int = 2,
    threads: int = 1,
    device: str = "cpu",
    seed: int = 0,
    concurrent: int = 1,
    dtype: str = "fp32",
) -> pd.DataFrame:
    """Measure one worker's per-layer profile on this device (medians over the iterations).

    concurrent > 1: as many workers share the machine (emulated hosts on one box, several workers per
    CPU node), so concurrent - 1 copies of the same training loop run beside the measured one, every one
    of them past its first iteration before the measurement starts. Times are then means: with more
    copies than cores the scheduler preempts, some iterations run whole and others lose a time slice,
    and the median would hide the share of the CPU the copy actually gets."""
    spec = WORKLOADS.get(workload)
    batch = batch or spec.batch
    seq_len = seq_len if seq_len is not None else spec.seq_len
    dev = torch.device(device)
    if dev.type == "cpu":
        torch.set_num_threads(threads)
        host_heap.keep()  # the heap a CPU rank keeps (harness/measure/host_heap.py): its page faults are not compute
    set_precision(dtype)  # as a cell of this dtype computes: an fp32 profile runs no TF32 convolution
    torch.manual_seed(seed)
    model = spec.build().to(dev)
    model.train()
    params = [p for p in model.parameters() if p.requires_grad]
    own = owners(model, params)
    data = spec.make_batch(batch, seq_len=seq_len, device=dev, seed=seed + 1000)
    with _load_copies(concurrent - 1, workload, batch, seq_len, threads, device):
        reduce, loss_fn = "mean" if concurrent > 1 else "median", autocast_loss(spec.loss, dtype, dev)
        totals = loop_totals(model, data, iters, warmup, dev, loss_fn, reduce)
        timing = scaled(time_iterations(model, spec, data, params, own, iters, warmup, dev, reduce, loss_fn), totals)
    counts = count_costs(spec, batch, seq_len)
    if len(counts["params"]) != len(params):
        raise RuntimeError("the meta copy of the model has a different parameter list")
    return build_table(spec, batch, seq_len, counts, timing, device, threads, iters, concurrent, dtype)


def counted_profile(workload: str, batch: int | None = None, seq_len: int | None = None) -> pd.DataFrame:
    """A profile with FLOPs and bytes but no times (source=counted): for FLOP-based prediction."""
    spec = WORKLOADS.get(workload)
    batch = batch or spec.batch
    seq_len = seq_len if seq_len is not None else spec.seq_len
    return build_table(spec, batch, seq_len, count_costs(spec, batch, seq_len), None, "meta", 0, 0)


def run_profile(
    workload: str,
    batch: int | None,
    seq_len: int | None,
    iters: int,
    warmup: int,
    threads: int,
    device: str,
    output: Path | None,
    counted_only: bool = False,
    concurrent: int = 1,
    dtype: str = "fp32",
):
    """`ddlbench profile`: the per-layer table of `workload` (measured, or FLOP-counted only), checked and
    written atomically to `output` (default profile-<workload>.parquet); returns (table, path)."""
    if iters < 1 or warmup < 0 or threads < 1 or concurrent < 1:
        raise UserError("--iters, --threads and --concurrent must be >= 1 and --warmup >= 0; fix the option")
    if device not in ("cpu", "cuda"):
        raise UserError(f"unknown device {device!r}: use cpu or cuda")
    if device == "cuda" and not torch.cuda.is_available():
        raise UserError("device cuda was selected but CUDA is not available here; use --device cpu")
    if dtype not in DTYPES:
        raise UserError(f"unknown dtype {dtype!r}: use {' or '.join(DTYPES)}; fix --dtype")
    batch, seq_len = check_shape(WORKLOADS.get(workload), batch, seq_len)
    out = output or Path(f"profile-{workload}.parquet")
    check_output_file(out, "-o/--output")
    if counted_only:
        df = counted_profile(workload, batch, seq_len)
    else:
        df = measure_profile(
            workload, batch, seq_len, iters, warmup, threads, device, concurrent=concurrent, dtype=dtype
        )
    write_parquet_atomic(df, out)
    return df, out
