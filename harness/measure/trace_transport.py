"""The Transport a traced scheme talks to (docs/ARCHITECTURE.md, "Traces"): the backend's own, with every
asynchronous operation recorded. Only created when a cell is traced (harness/measure/trace.py).

What "end" means (END_MEANING, written into every trace): the earliest completion the process could see.
On gloo (CPU tensors) that is the completion callback of the library's operation (its future), i.e. when
gloo finished it; elsewhere (NCCL, Horovod, point-to-point works without futures) it is when a thread's
wait() on the handle returned, which is later than the network finished when nobody waited yet.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future

import torch

from harness.backends.base import Handle

now = time.perf_counter

END_MEANING = ("start: when the scheme (or its background thread, named in args.thread) asked for the "
               "operation; issued: when a sender thread really started a deferred push; end: the earliest "
               "completion seen: the library's completion callback (end_source=future, gloo collectives, "
               "DDP buckets on CPU) or a thread's wait() returning (end_source=wait, an upper bound)")


class CommRecord:
    """One communication operation; `end` is the earliest completion seen (END_MEANING)."""

    __slots__ = (
        "end",
        "end_source",
        "issued",
        "iteration",
        "key",
        "nbytes",
        "op",
        "sent",
        "start",
        "tensors",
        "thread",
    )

    def __init__(self, op, key, nbytes, tensors, iteration, start):
        self.op, self.key, self.nbytes, self.tensors, self.iteration = op, key, nbytes, tensors, iteration
        self.thread, self.start = threading.current_thread().name, start
        self.issued = self.sent = self.end = None
        self.end_source = ""

    def done(self, t: float, source: str) -> None:
        if self.end is None or t < self.end:
            self.end, self.end_source = t, source


def follow(rec: CommRecord, handle) -> None:
    """Ask the library to tell us when the operation finishes, where it can: a deferred push (a
    concurrent Future resolving to the real handle once the sender thread started it) and gloo works'
    futures. NCCL futures complete on the CPU before the GPU has finished, so CUDA handles are skipped."""
    fut = getattr(handle, "future", None)
    if isinstance(fut, Future):
        def started(f):
            rec.issued = now()
            if f.exception() is None:
                follow(rec, f.result())
        fut.add_done_callback(started)
        return
    works = getattr(handle, "works", None)
    if not works or getattr(handle, "cuda", False):
        return
    try:
        futs = [w.get_future() for w in works]
    except (RuntimeError, AttributeError):  # point-to-point works of some versions have no future
        return
    torch.futures.collect_all(futs).then(lambda _f: rec.done(now(), "future"))


class TracedHandle(Handle):
    __slots__ = ("inner", "rec", "tracer")

    def __init__(self, inner: Handle, rec: CommRecord, tracer):
        self.inner, self.rec, self.tracer = inner, rec, tracer

    def wait_sent(self) -> None:
        self.inner.wait_sent()
        if self.rec.sent is None:
            self.rec.sent = now()

    def wait(self) -> None:
        t0 = now()
        self.inner.wait()
        t1 = now()
        self.rec.done(t1, "wait")
        tr = self.tracer
        if threading.current_thread() is tr.main and 0 <= tr.iteration <= tr.iters:
            tr.add("wait", f"wait {self.rec.key}", t0, t1, key=self.rec.key, bytes=self.rec.nbytes)


class TracedTransport:
    """Delegates everything to the backend's transport; records all-reduce, push-pull and the blocking
    MIN all-reduce (ByteScheduler's readiness agreement)."""

    def __init__(self, inner, tracer):
        self._inner, self._tracer = inner, tracer

    def __getattr__(self, name):
        return getattr(self._inner, name)

    def _async(self, op: str, fn, tensor, name, priority):
        rec = self._tracer.comm_start(op, name, tensor)
        handle = fn(tensor, name, priority)
        if rec is None:
            return handle
        self._tracer.sources.add("transport")
        follow(rec, handle)
        return TracedHandle(handle, rec, self._tracer)

    def allreduce_async(self, tensor, name, priority=0):
        return self._async("allreduce", self._inner.allreduce_async, tensor, name, priority)

    def push_pull_async(self, tensor, name, priority=0):
        return self._async("push_pull", self._inner.push_pull_async, tensor, name, priority)

    def allreduce_min_(self, tensor) -> None:
        rec = self._tracer.comm_start("allreduce_min", "readiness", tensor, [])
        self._inner.allreduce_min_(tensor)
        if rec is not None:
            rec.done(now(), "returned")
