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
import statistics
import time

import pandas as pd
import torch
from torch.utils._pytree import tree_leaves
from torch.utils.flop_counter import FlopCounterMode

from harness.schema import SCHEMA_VERSION

PROFILE_COLUMNS = [
    "schema_version", "source", "workload", "sample_unit", "device", "threads", "batch", "seq_len", "iters",
    "concurrent",         # copies of the same training loop running at once while measuring (1 = alone)
    "layer", "layer_index", "forward_order", "param_name", "param_index", "ready_order", "numel", "grad_bytes",
    "forward_s",          # the owning layer's forward time, shared equally by the layer's tensors
    "ready_s",            # gradient ready, seconds after the start of backward (median)
    "backward_s",         # ready_s minus the previous ready tensor's (merge_plan's input)
    "backward_total_s",   # whole backward (same on every row)
    "optimizer_s",        # optimizer step time, shared by tensor size
    "forward_flops", "backward_flops", "flops",     # per iteration (the whole batch)
    "forward_mem_bytes", "backward_mem_bytes",      # bytes read + written by the ops charged here
    "optimizer_mem_bytes",                          # SGD with momentum: p, g, buf read; p, buf written
]

SGD_BYTES_PER_ELEMENT = 5  # x element size: read param, grad, momentum; write param, momentum


def owners(model: torch.nn.Module, params: list) -> list[tuple[str, torch.nn.Module, list[int]]]:
    """(name, module, parameter indices) of each module that first holds parameters directly, in
    module order (the same rule as harness.schemes.bytescheduler)."""
    index = {id(p): i for i, p in enumerate(params)}
    seen: set[int] = set()
    out = []
    for name, mod in model.named_modules():
        mine = [index[id(p)] for p in mod.parameters(recurse=False) if id(p) in index and id(p) not in seen]
        if mine:
            seen.update(id(params[i]) for i in mine)
            out.append((name or "<root>", mod, mine))
    return out


def _param_names(model, params) -> list[str]:
    names = {id(p): n for n, p in model.named_parameters()}
    return [names.get(id(p), "?") for p in params]


class _Hooks:
    """Forward pre-hooks on owners and post-accumulate-grad hooks on tensors, calling back into
    whoever is recording (the timer or the counter)."""

    def __init__(self, own, params):
        self.on_layer = lambda j: None
        self.on_ready = lambda i: None
        self.handles = [mod.register_forward_pre_hook(lambda _m, _a, j=j: self.on_layer(j))
                        for j, (_, mod, _) in enumerate(own)]
        self.handles += [p.register_post_accumulate_grad_hook(lambda _p, i=i: self.on_ready(i))
                         for i, p in enumerate(params)]

    def remove(self):
        for h in self.handles:
            h.remove()


def _charge_forward(events: list[tuple[float, int]], t0: float, t1: float, n_layers: int) -> list[float]:
    """Seconds per owner from pre-hook stamps: each interval to the owner whose start opened it; the
    stretch before the first owner goes to the first owner."""
    out = [0.0] * n_layers
    if not events:
        return out
    for k, (t, j) in enumerate(events):
        end = events[k + 1][0] if k + 1 < len(events) else t1
        out[j] += end - t
    out[events[0][1]] += events[0][0] - t0
    return out


def _forward_order(events: list[tuple[float, int]], n_layers: int) -> list[int]:
    first: dict[int, int] = {}
    for k, (_, j) in enumerate(events):
        first.setdefault(j, k)
    ranked = sorted(range(n_layers), key=lambda j: (first.get(j, len(events) + j)))
    order = [0] * n_layers
    for pos, j in enumerate(ranked):
        order[j] = pos
    return order


def time_iterations(model, spec, data, params, own, iters: int, warmup: int, device: torch.device,
                    reduce: str = "median"):
    """Run warmup + iters training iterations; median (or mean) forward seconds per owner, ready seconds
    per tensor, backward and optimizer seconds, and the owners' forward order."""
    from harness.training import make_optimizer

    opt = make_optimizer(params)
    sync = (lambda: torch.cuda.synchronize(device)) if device.type == "cuda" else (lambda: None)

    def clock() -> float:
        sync()
        return time.perf_counter()

    hooks = _Hooks(own, params)
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
            opt.zero_grad(set_to_none=False)
            t3 = clock()
            if it >= warmup:
                fwd_runs.append(_charge_forward(events, t0, t1, len(own)))
                ready_runs.append([t2 - t1 if s != s else s for s in seen])  # never ready: end of backward
                bwd_runs.append(t2 - t1)
                opt_runs.append(t3 - t2)
                order = _forward_order(events, len(own))
    finally:
        hooks.remove()
    stat = statistics.mean if reduce == "mean" else statistics.median
    med = lambda runs: [stat(r[k] for r in runs) for k in range(len(runs[0]))]  # noqa: E731
    return {"layer_forward_s": med(fwd_runs), "ready_s": med(ready_runs), "backward_total_s":
            stat(bwd_runs), "optimizer_s": stat(opt_runs), "forward_order": order}


class _ChargingCounter(FlopCounterMode):
    """FlopCounterMode whose per-op FLOPs (and bytes moved) are also charged to the running interval:
    a forward owner, or the backward stretch that ends at the next gradient ready."""

    def __init__(self, n_layers: int, n_params: int):
        super().__init__(display=False)
        self.phase = "forward"
        self.layer: int | None = None
        self.pre_flops = self.pre_bytes = 0.0        # forward ops before the first owner starts
        self.fwd_flops = [0.0] * n_layers
        self.fwd_bytes = [0.0] * n_layers
        self.bwd_flops = [0.0] * n_params
        self.bwd_bytes = [0.0] * n_params
        self.pending_flops = self.pending_bytes = 0.0
        self.last_ready: int | None = None
        self._view: dict = {}

    def _is_view(self, packet) -> bool:
        v = self._view.get(packet)
        if v is None:
            v = False
            try:
                schema = getattr(packet, packet.overloads()[0])._schema
                alias = schema.returns[0].alias_info if schema.returns else None
                v = alias is not None and not alias.is_write
            except Exception:  # unknown op shape: count its bytes
                v = False
            self._view[packet] = v
        return v

    def _count_flops(self, func_packet, out, args, kwargs):
        flops = 0
        if func_packet in self.flop_registry:
            flops = self.flop_registry[func_packet](*args, **kwargs, out_val=out)
        nbytes = 0
        if not self._is_view(func_packet):
            for t in tree_leaves((args, kwargs, out)):
                if isinstance(t, torch.Tensor):
                    nbytes += t.numel() * t.element_size()
        if self.phase == "forward":
            if self.layer is None:
                self.pre_flops += flops
                self.pre_bytes += nbytes
            else:
                self.fwd_flops[self.layer] += flops
                self.fwd_bytes[self.layer] += nbytes
        else:
            self.pending_flops += flops
            self.pending_bytes += nbytes
        return super()._count_flops(func_packet, out, args, kwargs)

    def enter_layer(self, j: int) -> None:
        if self.phase != "forward":
            return
        if self.layer is None:
            self.fwd_flops[j] += self.pre_flops
            self.fwd_bytes[j] += self.pre_bytes
        self.layer = j

    def ready(self, i: int) -> None:
        self.bwd_flops[i] += self.pending_flops
        self.bwd_bytes[i] += self.pending_bytes
        self.pending_flops = self.pending_bytes = 0.0
        self.last_ready = i


def count_costs(spec, batch: int, seq_len, device="meta"):
    """FLOPs and bytes per forward owner and per backward interval, and the backward ready order,
    from one forward + backward of a copy of the model on `device` (meta: shapes only, no compute)."""
    with torch.device(device):
        model = spec.build()
    model.train()
    params = [p for p in model.parameters() if p.requires_grad]
    own = owners(model, params)
    data = spec.make_batch(batch, seq_len=seq_len, device=device, seed=12345)
    counter = _ChargingCounter(len(own), len(params))
    hooks = _Hooks(own, params)
    ready_seq: list[int] = []
    fwd_seq: list[int] = []

    def on_layer(j):
        fwd_seq.append(j)
        counter.enter_layer(j)

    def on_ready(i):
        counter.ready(i)
        ready_seq.append(i)
    hooks.on_layer, hooks.on_ready = on_layer, on_ready
    try:
        with counter:
            loss = spec.loss(model, data)
            counter.phase = "backward"
            loss.backward()
    finally:
        hooks.remove()
    if counter.last_ready is not None:  # trailing backward ops: charge the last ready tensor
        counter.bwd_flops[counter.last_ready] += counter.pending_flops
        counter.bwd_bytes[counter.last_ready] += counter.pending_bytes
    never = [i for i in range(len(params)) if i not in set(ready_seq)]
    return {
        "model": model, "params": params, "owners": own, "names": _param_names(model, params),
        "fwd_flops": counter.fwd_flops, "fwd_bytes": counter.fwd_bytes,
        "bwd_flops": counter.bwd_flops, "bwd_bytes": counter.bwd_bytes,
        "ready_seq": ready_seq + never,
        "forward_order": _forward_order([(0.0, j) for j in fwd_seq], len(own)),
    }


def build_table(spec, batch, seq_len, counts: dict, timing: dict | None, device: str, threads: int,
                iters: int, concurrent: int = 1) -> pd.DataFrame:
    """The tidy profile table (PROFILE_COLUMNS), one row per parameter tensor in parameter order."""
    params, own = counts["params"], counts["owners"]
    layer_of = {}
    for j, (_, _, mine) in enumerate(own):
        for i in mine:
            layer_of[i] = j
    if timing is not None:
        ready = timing["ready_s"]
        order = sorted(range(len(params)), key=lambda i: (ready[i], i))
        fwd_order = timing["forward_order"]
    else:
        order = counts["ready_seq"]
        fwd_order = counts["forward_order"]
    ready_rank = {i: r for r, i in enumerate(order)}
    prev_ready = {}
    prev = 0.0
    for i in order:
        if timing is not None:
            prev_ready[i] = max(0.0, timing["ready_s"][i] - prev)
            prev = timing["ready_s"][i]
    total_numel = sum(p.numel() for p in params) or 1
    nan = float("nan")
    rows = []
    for i, p in enumerate(params):
        j = layer_of[i]
        share = len(own[j][2])
        elem = p.element_size()
        rows.append({
            "schema_version": SCHEMA_VERSION, "source": "measured" if timing else "counted",
            "workload": spec.name, "sample_unit": spec.sample_unit, "device": device, "threads": threads,
            "batch": batch, "seq_len": seq_len, "iters": iters if timing else 0,
            "concurrent": concurrent if timing else 0, "layer": own[j][0], "layer_index": j, "forward_order": fwd_order[j],
            "param_name": counts["names"][i], "param_index": i, "ready_order": ready_rank[i],
            "numel": p.numel(), "grad_bytes": p.numel() * elem,
            "forward_s": timing["layer_forward_s"][j] / share if timing else nan,
            "ready_s": timing["ready_s"][i] if timing else nan,
            "backward_s": prev_ready[i] if timing else nan,
            "backward_total_s": timing["backward_total_s"] if timing else nan,
            "optimizer_s": timing["optimizer_s"] * p.numel() / total_numel if timing else nan,
            "forward_flops": counts["fwd_flops"][j] / share, "backward_flops": counts["bwd_flops"][i],
            "flops": counts["fwd_flops"][j] / share + counts["bwd_flops"][i],
            "forward_mem_bytes": counts["fwd_bytes"][j] / share, "backward_mem_bytes": counts["bwd_bytes"][i],
            "optimizer_mem_bytes": SGD_BYTES_PER_ELEMENT * p.numel() * elem,
        })
    return pd.DataFrame(rows, columns=PROFILE_COLUMNS)


def _load_loop(workload: str, batch: int, seq_len, threads: int, device: str, stop, started) -> None:
    """A training loop with nothing measured: the load of one more worker computing beside the one
    being profiled (`concurrent` > 1). Runs until `stop` is set."""
    from harness.training import make_optimizer
    from workloads import WORKLOADS

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
    import multiprocessing as mp

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
    from workloads import WORKLOADS

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
    from workloads import WORKLOADS

    spec = WORKLOADS.get(workload)
    batch = batch or spec.batch
    seq_len = seq_len if seq_len is not None else spec.seq_len
    return build_table(spec, batch, seq_len, count_costs(spec, batch, seq_len), None, "meta", 0, 0)
