"""Phase timing that is right on both devices and never waits for the device inside the measured window
(docs/ARCHITECTURE.md, "Timing loop").

A `Clock` takes marks and measures the time between two of them:

- CPU: a mark is `time.perf_counter()`;
- CUDA: a mark is a CUDA event recorded on the current (compute) stream, taken from a reused pool, and the
  time between two marks is the stream's time between them (`Event.elapsed_time`). Nothing synchronises
  when a mark is taken: a device-wide `torch.cuda.synchronize` would also wait for NCCL's streams, billing
  communication issued during backward to backward and hiding the overlap of ByteScheduler with the next
  forward.

`IterationTimer` marks the phases of each measured iteration and reads them later: an iteration is read
once its last event has completed (`Event.query()`, which does not block), so the host runs ahead of the
device as it does in a user's loop, and whatever is still in flight when the window closes is read after
one synchronisation at its end (nccl-tests' per-iteration mode `-I`, Triton's `do_bench`). A per-iteration
`synchronize` idles the GPU while the next iteration's first kernels are issued: 1.6-2.2% on bert-base and
gpt2-small on an H200 (reports/gpu/). Per iteration it records the device's start-to-start time (`iter_s`),
the phases, the host's issue time (`host_issue_s`: from the iteration's start until its optimizer step was
issued, NVBench's "CPU time" beside its "GPU time") and `device_lag_s`: how long after the host issued an
iteration's first mark the device reached it, on a common time line set by one anchor taken, synchronised,
just before the window. A lag near zero means the device was idle waiting for the host: the iteration's
pace is the host's (kernel launches, Python), not the GPU's or the network's.

`ForwardWaits` records the waits a scheme performs inside forward (pre-hooks) as pairs of marks either
side of the blocking wait. On CUDA the pair's time is how long the compute stream sat idle because of the
wait (zero when forward work already queued covered it); on CPU it is the wall time the main thread was
blocked.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import torch


class Clock:
    """CPU clock: a mark is perf_counter(); the base of the CUDA clock's interface."""

    cuda = False

    def mark(self) -> Any:
        return time.perf_counter()

    def elapsed(self, a, b) -> float:
        """Seconds from mark a to mark b (b taken after a; CUDA: both completed)."""
        return b - a

    def done(self, m) -> bool:
        """Has the device reached mark m? Never blocks (CPU: it has)."""
        return True

    def sync(self, m) -> None:
        """Block until mark m has been reached (CPU: it has)."""

    def settle(self) -> None:
        """Block until everything issued on the device, every stream, has finished (CPU: nothing to do).
        Only outside the measured window."""

    def release(self, *marks) -> None:
        """Marks already read go back to the pool (CPU: nothing to keep)."""


class CudaClock(Clock):
    """Marks are CUDA events on the current stream of the calling thread, reused from a pool once read.
    `event` builds an event (torch.cuda.Event; tests pass a fake with the same record/query/synchronize/
    elapsed_time methods), `stream` gives the current stream, `settle` synchronises the whole device."""

    cuda = True

    def __init__(
        self,
        device: torch.device,
        event: Callable[..., Any] | None = None,
        stream: Callable[[torch.device], Any] | None = None,
        settle: Callable[[torch.device], None] | None = None,
    ):
        self.device = device
        self._event = event or torch.cuda.Event
        self._stream = stream or torch.cuda.current_stream
        self._settle = settle or torch.cuda.synchronize
        self._free: list = []
        self.created = 0
        """Events ever built: bounded by the marks in flight, not by the iterations run."""

    def mark(self):
        try:
            e = self._free.pop()  # atomic under the GIL: hooks on autograd's thread mark too
        except IndexError:
            e = self._event(enable_timing=True)
            self.created += 1
        e.record(self._stream(self.device))
        return e

    def elapsed(self, a, b) -> float:
        return a.elapsed_time(b) / 1000.0  # CUDA events count milliseconds

    def done(self, m) -> bool:
        return bool(m.query())

    def sync(self, m) -> None:
        m.synchronize()  # this stream's work up to the mark only, not NCCL's streams

    def settle(self) -> None:
        self._settle(self.device)

    def release(self, *marks) -> None:
        self._free.extend(marks)


_CUDA_CLOCKS: dict[torch.device, CudaClock] = {}


def make_clock(device: torch.device) -> Clock:
    """Events on CUDA, perf_counter elsewhere. One CUDA clock per device and process, so the loop and a
    scheme's forward waits draw on, and return to, one pool of events."""
    if device.type != "cuda":
        return Clock()
    if device not in _CUDA_CLOCKS:
        _CUDA_CLOCKS[device] = CudaClock(device)
    return _CUDA_CLOCKS[device]


@dataclass
class _Iteration:
    """One measured iteration, marked and waiting to be read."""

    begin: Any
    host_begin: float
    marks: list = field(default_factory=list)  # [(phase name, mark)] in order
    host_issued: float = 0.0
    waits: list = field(default_factory=list)  # [(mark, mark)] of waits inside the first phase


class IterationTimer:
    """The measured window: `start_window()` once (after the barrier; one synchronisation), then per
    iteration `begin()`, `phase(name)` after each phase, `end(waits)`; `finish()` after the window returns
    one dict per iteration: {name: seconds} of each phase, `iter_s`, `host_issue_s`, `device_lag_s`, and
    `<first phase>_waited_s` (the seconds of the `waits` pairs, which lie inside the first phase)."""

    def __init__(self, clock: Clock):
        self.clock = clock
        self._pending: deque[_Iteration] = deque()
        self._read: list[dict] = []
        self._prev: _Iteration | None = None  # the last read iteration, waiting for the next one's begin
        self._current: _Iteration | None = None
        self._anchor: tuple[Any, float] | None = None

    # --- marking (inside the window: nothing here waits for the device) ---------------------------------
    def start_window(self) -> None:
        """Anchor the device's time line to the host's: one mark, synchronised, read against perf_counter
        (the device is then idle, so it reached the mark when the host saw it, within the wake-up latency)."""
        m = self.clock.mark()
        self.clock.sync(m)
        self._anchor = (m, time.perf_counter())

    def begin(self) -> None:
        host = time.perf_counter()
        self._current = _Iteration(begin=self.clock.mark(), host_begin=host)

    def phase(self, name: str) -> None:
        self._current.marks.append((name, self.clock.mark()))

    def end(self, waits: list[tuple[Any, Any]] | None = None) -> None:
        """The iteration's work is issued: keep its marks and read whatever the device has finished."""
        it = self._current
        it.host_issued = time.perf_counter()
        it.waits = list(waits or ())
        self._pending.append(it)
        self._current = None
        self.poll()

    def poll(self) -> None:
        """Read, in order, every pending iteration whose last mark the device has reached (no blocking)."""
        while self._pending and self.clock.done(self._pending[0].marks[-1][1]):
            self._read_one(self._pending.popleft())

    # --- reading -----------------------------------------------------------------------------------------
    def _read_one(self, it: _Iteration) -> None:
        el = self.clock.elapsed
        row: dict[str, float] = {}
        prev = it.begin
        for name, m in it.marks:
            row[name] = el(prev, m)
            prev = m
        first = it.marks[0][0]
        row[f"{first}_waited_s"] = sum(max(0.0, el(a, b)) for a, b in it.waits)
        row["host_issue_s"] = it.host_issued - it.host_begin
        if self._anchor is not None:
            mark0, host0 = self._anchor
            row["device_lag_s"] = max(0.0, host0 + el(mark0, it.begin) - it.host_begin)
        self._read.append(row)
        self.clock.release(*(m for _, m in it.marks), *(m for pair in it.waits for m in pair))
        self._close_previous(it.begin)
        self._prev = it

    def _close_previous(self, next_begin) -> None:
        """The previous iteration runs from its begin to this one's (device start-to-start)."""
        if self._prev is not None:
            self._read[-2]["iter_s"] = self.clock.elapsed(self._prev.begin, next_begin)
            self.clock.release(self._prev.begin)

    def finish(self) -> list[dict]:
        """After the window: wait for everything issued (every stream), read the rest; the last iteration
        ends at a mark taken once the device is idle."""
        self.clock.settle()
        end = self.clock.mark()
        self.clock.sync(end)
        while self._pending:
            self._read_one(self._pending.popleft())
        if self._prev is not None:
            self._read[-1]["iter_s"] = self.clock.elapsed(self._prev.begin, end)
            self.clock.release(self._prev.begin)
        self.clock.release(end)
        if self._anchor is not None:
            self.clock.release(self._anchor[0])
        out, self._read, self._prev, self._anchor = self._read, [], None, None
        return out


class ForwardWaits:
    """Waits a scheme performs inside forward, as pairs of clock marks (see the module's docstring)."""

    def __init__(self, clock: Clock):
        self.clock = clock
        self.pairs: list[tuple[Any, Any]] = []

    @contextmanager
    def waiting(self):
        a = self.clock.mark()
        try:
            yield
        finally:
            self.pairs.append((a, self.clock.mark()))

    def take(self) -> list[tuple[Any, Any]]:
        """The pairs recorded since the last take (and forget them)."""
        out, self.pairs = self.pairs, []
        return out
