"""Phase timing that is right on both devices (docs/ARCHITECTURE.md, "Timing loop").

A `Clock` takes marks and measures the time between two of them:

- CPU: a mark is `time.perf_counter()`;
- CUDA: a mark is a CUDA event recorded on the current (compute) stream, and the time between two marks is
  the stream's time between them (`Event.elapsed_time`). Nothing synchronises when a mark is taken: a
  device-wide `torch.cuda.synchronize` would also wait for NCCL's streams, billing communication issued
  during backward to backward and hiding the overlap of ByteScheduler with the next forward.

`PhaseTimer` marks the phases of one iteration and synchronises once, on the iteration's last mark
(`collect`); `ForwardWaits` records the waits a scheme performs inside forward (pre-hooks) as pairs of
marks either side of the blocking wait. On CUDA the pair's time is how long the compute stream sat idle
because of the wait (zero when forward work already queued covered it); on CPU it is the wall time the
main thread was blocked.
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from typing import Any, Callable

import torch


class Clock:
    """CPU clock: a mark is perf_counter(); the base of the CUDA clock's interface."""

    cuda = False

    def mark(self) -> Any:
        return time.perf_counter()

    def elapsed(self, a, b) -> float:
        """Seconds from mark a to mark b (b taken after a; CUDA: b already synchronised)."""
        return b - a

    def sync(self, m) -> None:
        """Block until mark m has been reached (CPU: it has)."""


class CudaClock(Clock):
    """Marks are CUDA events on the current stream of the calling thread. `event` builds an event
    (torch.cuda.Event; tests pass a fake with the same record/synchronize/elapsed_time methods)."""

    cuda = True

    def __init__(self, device: torch.device, event: Callable[..., Any] | None = None,
                 stream: Callable[[torch.device], Any] | None = None):
        self.device = device
        self._event = event or torch.cuda.Event
        self._stream = stream or torch.cuda.current_stream

    def mark(self):
        e = self._event(enable_timing=True)
        e.record(self._stream(self.device))
        return e

    def elapsed(self, a, b) -> float:
        return a.elapsed_time(b) / 1000.0  # CUDA events count milliseconds

    def sync(self, m) -> None:
        m.synchronize()  # this stream's work up to the mark only, not NCCL's streams


def make_clock(device: torch.device) -> Clock:
    """Events on CUDA, perf_counter elsewhere."""
    return CudaClock(device) if device.type == "cuda" else Clock()


class PhaseTimer:
    """The phases of one iteration: `begin()` (returns the wall-clock start), `phase(name)` after each
    phase, `collect()` once at the end (one synchronisation) -> {name: seconds}."""

    def __init__(self, clock: Clock):
        self.clock = clock
        self._marks: list[tuple[str, Any]] = []

    def begin(self) -> float:
        wall = time.perf_counter()
        self._marks = [("", self.clock.mark())]
        return wall

    def phase(self, name: str) -> None:
        self._marks.append((name, self.clock.mark()))

    def collect(self, extra: list[tuple[Any, Any]] | None = None) -> tuple[dict[str, float], float]:
        """Synchronise on the last mark, then ({phase: seconds}, seconds of the `extra` mark pairs, which
        must lie before the last mark on the same stream)."""
        self.clock.sync(self._marks[-1][1])
        el = self.clock.elapsed
        phases = {name: el(self._marks[i - 1][1], m) for i, (name, m) in enumerate(self._marks) if i}
        waited = sum(max(0.0, el(a, b)) for a, b in (extra or ()))
        return phases, waited


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
