"""Timelines of a few measured iterations (docs/ARCHITECTURE.md, "Traces").

Only built when a cell asks for it (`trace_iters > 0`): with tracing off the worker never creates a
Tracer, so no hook, wrapper or per-iteration check exists. When on, the Tracer

- wraps the Transport handed to the scheme (`transport()`): every all-reduce / push-pull records its
  start (on the thread that issued it), its bytes, key and the gradients it covers, and its end;
- wraps the scheme and barrier the loop calls (`attach()`): phases forward, backward, comm_wait, optimizer,
  iteration boundaries, and the barrier that opens the measurement (the clock reference: every rank
  reads its clock right after it, so ranks align to within the barrier's exit skew);
- hooks each module that owns parameters: its forward, its backward (from its output's gradient node
  starting to the next layer's), and the scheme's own forward pre-hooks (ByteScheduler waits there);
- hooks every optimizer's step, and DDP's buckets through a comm hook (torch's allreduce_hook, timed).

Events are recorded for the first `iters` measured iterations; communication they issued is followed to
its end. Export: Tracer.export() -> plain dict, merged into Chrome trace JSON by trace_json.py.
"""

from __future__ import annotations

import bisect
import threading
from pathlib import Path

import torch
import torch.distributed as dist
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.nn.parallel import DistributedDataParallel
from torch.optim.optimizer import (
    register_optimizer_step_post_hook,
    register_optimizer_step_pre_hook,
)

from harness.contracts.devices import tensor_backend
from harness.core.atomic import write_json_atomic
from harness.measure.trace_json import chrome_trace
from harness.measure.trace_scheme import TracedScheme
from harness.measure.trace_transport import CommRecord, CompletionWatcher, EventDone, TracedTransport, now


class Tracer:
    def __init__(self, iters: int, rank: int):
        self.iters, self.rank = iters, rank
        self.main = threading.current_thread()
        self.t_ref: float | None = None
        self.iteration = -1  # -1 until the barrier; then the measured iteration the loop is in
        self.comm_iteration = -1  # the iteration whose backward began last (after the barrier)
        self.events: list[tuple] = []  # (lane, name, start, end, args)
        self.comms: list[CommRecord] = []
        self.iter_starts: list[float] = []
        self._hooks: list = []
        self._grad_map: tuple = ((), ())
        self._bwd_open: tuple | None = None
        self._opt_start: float | None = None
        self._in_pre = False  # inside a module's forward pre-hooks (the scheme's run between ours)
        self.sources: set[str] = set()
        self.completions = CompletionWatcher()  # NCCL operations' real ends (trace_transport.py)

    # --- state ----------------------------------------------------------------------------------
    @property
    def recording(self) -> bool:
        return 0 <= self.iteration < self.iters

    def add(self, lane: str, name: str, t0: float, t1: float, **args) -> None:
        self.events.append((lane, name, t0, t1, {"iteration": self.iteration, **args}))

    # --- transport --------------------------------------------------------------------------------
    def transport(self, inner):
        return TracedTransport(inner, self)

    def comm_start(self, op: str, key: str, tensor: torch.Tensor, names=None) -> CommRecord | None:
        """A record of an operation issued now (None when not traced). It belongs to the iteration whose
        backward began last: the gradients it carries are that iteration's, even when a scheduler thread
        sends them while the next iteration's forward runs."""
        if not 0 <= self.comm_iteration < self.iters:
            return None
        rec = CommRecord(
            op,
            key,
            tensor.numel() * tensor.element_size(),
            names if names is not None else self._names(tensor),
            self.comm_iteration,
            now(),
        )
        self.comms.append(rec)
        return rec

    def _names(self, tensor: torch.Tensor) -> list[str]:
        """Parameters whose gradient memory the tensor covers (views of gradients: buckets, partitions)."""
        lo = tensor.data_ptr()
        hi = lo + tensor.numel() * tensor.element_size()
        for attempt in range(2):
            starts, spans = self._grad_map
            i = bisect.bisect_right(starts, lo) - 1
            found = []
            while 0 <= i < len(starts) and starts[i] < hi:
                _, e, name = spans[i]
                if e > lo:
                    found.append(name)
                i += 1
            if found or attempt:
                return found
            spans = sorted(
                (g.data_ptr(), g.data_ptr() + g.numel() * g.element_size(), n)
                for n, g in ((n, p.grad) for n, p in self._named)
                if g is not None
            )
            self._grad_map = ([s for s, _, _ in spans], spans)
        return []

    # --- loop wrappers ---------------------------------------------------------------------------
    def attach(self, fwd: torch.nn.Module, model: torch.nn.Module, scheme, barrier):
        """Install the hooks; returns (scheme, barrier) for the loop to call instead. An iteration starts
        when the loop calls the model (`fwd`'s first forward pre-hook): the loop's own start is one call
        earlier."""
        self._named = list(model.named_parameters())
        self._hooks.append(fwd.register_forward_pre_hook(self._root_pre, prepend=True))
        self._install_modules(model)
        self._hooks.append(register_optimizer_step_pre_hook(self._opt_pre))
        self._hooks.append(register_optimizer_step_post_hook(self._opt_post))
        if isinstance(fwd, DistributedDataParallel):
            fwd.register_comm_hook(fwd.process_group, self._ddp_hook(dict(self._named_by_id())))
            self.sources.add("ddp comm hook")

        def traced_barrier():
            barrier()
            self.t_ref = now()
            self.iteration = 0

        return TracedScheme(scheme, self), traced_barrier

    def _root_pre(self, _m, _a):
        if 0 <= self.iteration <= self.iters:
            self._new_iteration(now())

    def _named_by_id(self):
        return ((id(p), n) for n, p in self._named)

    def _new_iteration(self, t: float) -> None:
        if self.iter_starts:
            self._close_backward(t)
            self.iteration += 1
        self.iter_starts.append(t)
        if self.iteration > self.iters:  # the iteration after the last traced one has begun: unhook
            self.detach()

    def finish(self) -> None:
        """End of the loop (after the scheme's flush): closes the last iteration, removes every hook."""
        if 0 <= self.iteration <= self.iters:
            self.iter_starts.append(now())
        self.iteration = self.comm_iteration = self.iters + 1  # what follows (probes) is not traced
        self.detach()

    def detach(self) -> None:
        for h in self._hooks:
            h.remove()
        self._hooks = []

    # --- module hooks ----------------------------------------------------------------------------
    def _install_modules(self, model: torch.nn.Module) -> None:
        for name, mod in model.named_modules():
            if not any(True for _ in mod.parameters(recurse=False)):
                continue
            label = name or type(mod).__name__
            scheme_pre = len(mod._forward_pre_hooks) > 0  # the scheme's own (registered in setup)
            box: dict = {}
            if scheme_pre:
                self._hooks.append(mod.register_forward_pre_hook(self._pre_outer(box), prepend=True))
            self._hooks.append(mod.register_forward_pre_hook(self._pre_inner(box, label)))
            self._hooks.append(mod.register_forward_hook(self._post(box, label)))

    def _pre_outer(self, box):
        def hook(_m, _a):
            box["outer"] = now()
            self._opt_start, self._in_pre = None, True

        return hook

    def _pre_inner(self, box, label):
        def hook(_m, _a):
            t = now()
            outer = box.pop("outer", None)
            self._in_pre = False
            # the scheme's pre-hooks: waiting for the previous iteration's gradients (up to the layer's
            # optimizer step, which the optimizer hooks record), recorded one iteration past the last
            if outer is not None and 0 <= self.iteration <= self.iters:
                wait_end = self._opt_start or t
                if wait_end - outer > 0:
                    self.add(
                        "wait",
                        f"pre-hook wait {label}",
                        outer,
                        wait_end,
                        layer=label,
                        what="scheme forward pre-hook before the layer's update (ByteScheduler: its "
                        "partitions of the previous iteration)",
                    )
            box["start"] = t

        return hook

    def _post(self, box, label):
        def hook(_m, _a, out):
            if not self.recording:
                return
            self.add("compute", f"fwd {label}", box.pop("start", now()), now(), layer=label)
            node = _grad_node(out)
            if node is not None:
                node.register_prehook(self._bwd_start(label))

        return hook

    def _bwd_start(self, label):
        def prehook(_grads):
            t = now()
            self._close_backward(t)
            self._bwd_open = (label, t)

        return prehook

    def _close_backward(self, t: float) -> None:
        if self._bwd_open is not None:
            label, t0 = self._bwd_open
            self._bwd_open = None
            self.add("compute", f"bwd {label}", t0, t, layer=label)

    # --- optimizer and DDP ------------------------------------------------------------------------
    def _opt_pre(self, opt, _args, _kwargs):
        t = opt.__dict__["_ddlbench_t0"] = now()
        if self._in_pre and self._opt_start is None and threading.current_thread() is self.main:
            self._opt_start = t

    def _opt_post(self, opt, _args, _kwargs):
        t0 = opt.__dict__.pop("_ddlbench_t0", None)
        # the traced iterations' steps, and the updates in the next forward's pre-hooks (ByteScheduler)
        tail = self._in_pre and self.iteration == self.iters
        if t0 is None or threading.current_thread() is not self.main or not (self.recording or tail):
            return
        self.add("compute", "optimizer.step", t0, now(), params=sum(len(g["params"]) for g in opt.param_groups))

    def _ddp_hook(self, names_by_id: dict):
        def hook(group, bucket):
            buf = bucket.buffer()
            rec = self.comm_start(
                "allreduce",
                f"ddp bucket{bucket.index()}",
                buf,
                [names_by_id.get(id(p), "?") for p in bucket.parameters()],
            )
            fut = default_hooks.allreduce_hook(group, bucket)
            if rec is None:
                return fut
            # an NCCL future completes once the collective is queued: its end is its CUDA event's
            nccl = buf.is_cuda and tensor_backend(str(dist.get_backend(group)), "cuda") == "nccl"

            def done(f):
                if nccl:  # the callback runs on the collective's stream: an event there marks its end
                    event = torch.cuda.Event()
                    event.record()
                    self.completions.add(rec, [EventDone(event)])
                else:
                    rec.done(now(), "future")
                return f.value()

            return fut.then(done)

        return hook

    def write(self, transport, out: Path, cell_id: str) -> None:
        """Every rank's timeline to rank 0 (collective), merged into out/trace.json there."""
        ranks = transport.gather_object(self.export()) if transport is not None else [self.export()]
        if self.rank == 0 and ranks is not None:
            write_json_atomic(out / "trace.json", chrome_trace(cell_id, ranks, self.iters))

    # --- export -----------------------------------------------------------------------------------
    def export(self) -> dict:
        """Plain data (picklable, JSON-able) with times in seconds since the reference."""
        ref = self.t_ref or 0.0
        rel = lambda t: None if t is None else t - ref
        starts = [t - ref for t in self.iter_starts[: self.iters + 1]]
        return {
            "rank": self.rank,
            "iteration_starts_s": starts,
            "sources": sorted(self.sources),
            "events": [(lane, name, t0 - ref, t1 - ref, args) for lane, name, t0, t1, args in self.events],
            "comms": [
                {
                    "op": c.op,
                    "key": c.key,
                    "bytes": c.nbytes,
                    "tensors": c.tensors,
                    "iteration": c.iteration,
                    "thread": c.thread,
                    "start": rel(c.start),
                    "issued": rel(c.issued),
                    "sent": rel(c.sent),
                    "end": rel(c.end),
                    "end_source": c.end_source,
                }
                for c in self.comms
            ],
        }


def _grad_node(out):
    if isinstance(out, torch.Tensor):
        return out.grad_fn
    if isinstance(out, (tuple, list)):
        for o in out:
            if isinstance(o, torch.Tensor) and o.grad_fn is not None:
                return o.grad_fn
    return None
