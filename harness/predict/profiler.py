"""Per-layer profile of one worker: forward and backward time per parameter tensor, measured on this
device, plus FLOPs and memory traffic counted per layer. The predictor's compute input.

    ddlbench profile bert-base-tiny --iters 10 -o prof.parquet

Forward: a forward pre-hook on every module that owns parameters (the same owners ByteScheduler's
engine hooks) stamps the clock; the time from one owner's start to the next owner's start is charged
to the first (so the non-parameter work after a layer, and the loss, belong to it). Backward: a
post-accumulate-grad hook per tensor stamps when its gradient is ready, relative to the start of
backward (as harness.schemes.bucketed profiles it). FLOPs: torch.utils.flop_counter's formulas,
charged to the same intervals (forward: the running owner; backward: the next gradient to become
ready), counted on a `meta` copy of the model so counting costs no compute.
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import statistics
import time

import pandas as pd
import torch

from harness.predict.flop_count import count_costs
from harness.predict.layer_hooks import LayerHooks, charge_forward, forward_order_of, owners
from harness.predict.profile_table import build_table
from harness.training import make_optimizer
from workloads import WORKLOADS


def time_iterations(model, spec, data, params, own, iters: int, warmup: int, device: torch.device,
                    reduce: str = "median"):
    """Run warmup + iters training iterations; median (or mean) forward seconds per owner, ready seconds
    per tensor, backward and optimizer seconds, and the owners' forward order."""
    opt = make_optimizer(params)
    sync = (lambda: torch.cuda.synchronize(device)) if device.type == "cuda" else (lambda: None)

    def clock() -> float:
        sync()
        return time.perf_counter()

    hooks = LayerHooks(own, params)
    fwd_runs, ready_runs, bwd_runs, opt_runs, events = [], [], [], [], []
    state = {"t_bwd": 0.0}
    seen = [0.0] * len(params)
    hooks.on_layer = lambda j: events.append((clock(), j))

    def on_ready(i):
        seen[i] = clock() - state["t_bwd"]
    hooks.on_ready = on_ready
    try:
        for it in range(warmup + iters):
            events.clear()
            seen[:] = [float("nan")] * len(params)
            t0 = clock()
            loss = spec.loss(model, data)
            t1 = clock()
            state["t_bwd"] = t1
            loss.backward()
            t2 = clock()
            opt.step()
            opt.zero_grad(set_to_none=True)  # as a user's loop and the `local` baseline free them
            t3 = clock()
            if it >= warmup:
                fwd_runs.append(charge_forward(events, t0, t1, len(own)))
                ready_runs.append([t2 - t1 if s != s else s for s in seen])  # never ready: end of backward
                bwd_runs.append(t2 - t1)
                opt_runs.append(t3 - t2)
                order = forward_order_of(events, len(own))
    finally:
        hooks.remove()
    stat = statistics.mean if reduce == "mean" else statistics.median
    med = lambda runs: [stat(r[k] for r in runs) for k in range(len(runs[0]))]  # noqa: E731
    return {"layer_forward_s": med(fwd_runs), "ready_s": med(ready_runs), "backward_total_s":
            stat(bwd_runs), "optimizer_s": stat(opt_runs), "forward_order": order}


def _load_loop(workload: str, batch: int, seq_len, threads: int, device: str, stop, started) -> None:
    """A training loop with nothing measured: the load of one more worker computing beside the one
    being profiled (`concurrent` > 1). Runs until `stop` is set."""
    spec = WORKLOADS.get(workload)
    dev = torch.device(device)
    if dev.type == "cpu":
        torch.set_num_threads(threads)
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
    loads = [ctx.Process(target=_load_loop, daemon=True,
                         args=(workload, batch, seq_len, threads, device, stop, started)) for _ in range(copies)]
    for p in loads:
        p.start()
    try:
        for _ in loads:
            if not started.acquire(timeout=600):
                raise RuntimeError("a load copy did not finish its first iteration in 600 s")
        yield
    finally:
        stop.set()
        for p in loads:
            p.join(timeout=30)
            if p.is_alive():
                p.kill()


def measure_profile(workload: str, batch: int | None = None, seq_len: int | None = None, iters: int = 5,
                    warmup: int = 2, threads: int = 1, device: str = "cpu", seed: int = 0,
                    concurrent: int = 1) -> pd.DataFrame:
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
    torch.manual_seed(seed)
    model = spec.build().to(dev)
    model.train()
    params = [p for p in model.parameters() if p.requires_grad]
    own = owners(model, params)
    data = spec.make_batch(batch, seq_len=seq_len, device=dev, seed=seed + 1000)
    with _load_copies(concurrent - 1, workload, batch, seq_len, threads, device):
        timing = time_iterations(model, spec, data, params, own, iters, warmup, dev,
                                 "mean" if concurrent > 1 else "median")
    counts = count_costs(spec, batch, seq_len)
    if len(counts["params"]) != len(params):
        raise RuntimeError("the meta copy of the model has a different parameter list")
    return build_table(spec, batch, seq_len, counts, timing, device, threads, iters, concurrent)


def counted_profile(workload: str, batch: int | None = None, seq_len: int | None = None) -> pd.DataFrame:
    """A profile with FLOPs and bytes but no times (source=counted): for FLOP-based prediction."""
    spec = WORKLOADS.get(workload)
    batch = batch or spec.batch
    seq_len = seq_len if seq_len is not None else spec.seq_len
    return build_table(spec, batch, seq_len, count_costs(spec, batch, seq_len), None, "meta", 0, 0)
