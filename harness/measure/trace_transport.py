"""The Transport a traced scheme talks to (docs/ARCHITECTURE.md, "Traces"): the backend's own, with every
asynchronous operation recorded. Only created when a cell is traced (harness/measure/trace.py).

What "end" means (END_MEANING, written into every trace): the earliest completion the process could see.
On gloo that is the completion callback of the library's operation (its future), i.e. when gloo finished
it; on NCCL, whose wait() returns at once (it only orders the current stream behind the collective) and
whose futures complete on the CPU before the GPU has finished, it is the first time a watcher thread finds
the operation's CUDA event complete (Work.is_completed()); elsewhere (Horovod, point-to-point works
without futures) it is when a thread's wait() on the handle returned, which is later than the network
finished when nobody waited yet.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future

import torch

from harness.contracts.transport import Handle

now = time.perf_counter

END_MEANING = (
    "start: when the scheme (or its background thread, named in args.thread) asked for the "
    "operation; issued: when a sender thread really started a deferred push; end: the earliest "
    "completion seen: the library's completion callback (end_source=future, gloo collectives, "
    "DDP buckets on CPU), an NCCL operation's CUDA event found complete by a watcher thread "
    "(end_source=completed, within its poll interval) or a thread's wait() returning "
    "(end_source=wait, an upper bound)"
)

COMPLETION_POLL_S = 100e-6
"""How often the watcher asks pending NCCL operations whether they have finished (a traced cell only)."""


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


class CompletionWatcher:
    """Stamps the end of NCCL operations when they really finish: a daemon thread, started with the first
    operation, asks each pending operation's works `is_completed()` (their CUDA events) every
    COMPLETION_POLL_S and sleeps while nothing is pending."""

    def __init__(self, poll_s: float = COMPLETION_POLL_S):
        self.poll_s = poll_s
        self._pending: list[tuple[CommRecord, list]] = []
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None

    def add(self, rec: CommRecord, works) -> None:
        with self._lock:
            self._pending.append((rec, list(works)))
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="trace-completion", daemon=True)
                self._thread.start()
        self._wake.set()

    def _run(self) -> None:
        while True:
            with self._lock:
                pending = list(self._pending)
            if not pending:
                self._wake.wait()
                self._wake.clear()
                continue
            finished = [(rec, works) for rec, works in pending if all(w.is_completed() for w in works)]
            t = now()
            for rec, _ in finished:
                rec.done(t, "completed")
            if finished:
                with self._lock:
                    self._pending = [p for p in self._pending if all(p is not f for f in finished)]
            time.sleep(self.poll_s)


class EventDone:
    """A recorded CUDA event seen as a work: complete when the stream has reached it (for the watcher)."""

    __slots__ = ("event",)

    def __init__(self, event):
        self.event = event

    def is_completed(self) -> bool:
        return bool(self.event.query())


def follow(rec: CommRecord, handle, watcher: CompletionWatcher | None = None) -> None:
    """Ask the library to tell us when the operation finishes, where it can: a deferred push (a
    concurrent Future resolving to the real handle once the sender thread started it), gloo works'
    futures, and NCCL works' CUDA events through `watcher` (NCCL futures complete on the CPU before the
    GPU has finished, so they are not used)."""
    fut = getattr(handle, "future", None)
    if isinstance(fut, Future):

        def started(f):
            rec.issued = now()
            if f.exception() is None:
                follow(rec, f.result(), watcher)

        fut.add_done_callback(started)
        return
    works = getattr(handle, "works", None)
    if not works:
        return
    if getattr(handle, "poll", False):  # an NCCL operation (backends/torch_dist/handles.py)
        if watcher is not None:
            watcher.add(rec, works)
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
        if not getattr(self.inner, "poll", False):  # an NCCL wait() returns before the operation ends
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
        follow(rec, handle, self._tracer.completions)
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
