"""A small discrete-event kernel: an event queue of timed callbacks, generator processes, and FIFO
resources (links, collective channels) whose job completions are events.

    sim = Sim()
    link = Fifo(sim)
    def worker():
        yield 0.010                      # compute for 10 ms
        yield link.submit(0.002)         # wait until a 2 ms transfer is served (FIFO)
    sim.process(worker()); sim.run()     # sim.now == 0.012

A process yields a number (a delay in seconds), an Event (resume once it has fired) or a list of
Events (resume once all have fired). Pure Python, no I/O: the predictor runs thousands of these.
"""

from __future__ import annotations

import gc
import math
from collections.abc import Callable, Iterable
from heapq import heappop, heappush


class Event:
    """Fires once, at a simulated time; processes waiting on it then resume."""

    __slots__ = ("_waiters", "sim", "time")

    def __init__(self, sim: Sim):
        self.sim = sim
        self.time: float | None = None
        self._waiters: list[Callable[[], None]] = []

    @property
    def fired(self) -> bool:
        return self.time is not None

    def told(self) -> Event:
        """A news event's news told: whoever waits on it wakes, and the event for the next news is returned, a fresh
        one (`self.news = self.news.told()`); itself, unfired, while nothing waits on it: news nobody hears costs no
        event. Its waiters only queue their next steps (`Sim.process`), so none reads the attribute before it is
        renewed."""
        if not self._waiters:
            return self
        fresh = Event(self.sim)
        self.fire()
        return fresh

    def fire(self) -> None:
        if self.time is not None:
            return
        self.time = self.sim.now
        waiters = self._waiters
        if waiters:
            self._waiters = []
            for w in waiters:
                w()

    def on_fire(self, fn: Callable[[], None]) -> None:
        if self.time is not None:
            fn()
        else:
            self._waiters.append(fn)


class Sim:
    """The event queue: (time, sequence, fn, args), popped in time order and, among equal times, in the order
    they were queued. A process whose next step is due before everything queued runs it at once instead of
    queueing it (`process`): the same order, without the queue's work."""

    __slots__ = ("_queue", "_seq", "now")

    def __init__(self) -> None:
        self.now = 0.0
        self._queue: list = []
        self._seq = 0  # FIFO among events due at the same time (deterministic)

    def at(self, delay: float, fn: Callable, *args) -> None:
        """Run fn(*args) `delay` seconds from now."""
        self._seq += 1
        heappush(self._queue, (self.now + (delay if delay > 0.0 else 0.0), self._seq, fn, args))

    def timeout(self, delay: float) -> Event:
        ev = Event(self)
        self.at(delay, ev.fire)
        return ev

    def all_of(self, events: Iterable[Event]) -> Event:
        events = [e for e in events if e.time is None]
        done = Event(self)
        if not events:
            self.at(0.0, done.fire)
            return done
        left = [len(events)]

        def one() -> None:
            left[0] -= 1
            if left[0] == 0:
                done.fire()

        for e in events:
            e.on_fire(one)
        return done

    def process(self, gen) -> Event:
        """Start a generator process now; the returned event fires when it returns."""
        finished = Event(self)
        queue = self._queue

        def resume() -> None:  # what it waited for fired: its next step after everything already due now
            self.at(0.0, step)

        def step() -> None:
            # Only the queue's loop (`run`) calls a step, so a next step due strictly before the queue's head
            # (whose events due at the same time were queued first) is the next event it would pop: run it here.
            while True:
                try:
                    y = next(gen)
                except StopIteration:
                    finished.fire()
                    return
                kind = type(y)
                if kind is float or kind is int:
                    due = self.now + (y if y > 0.0 else 0.0)
                elif kind is Event and y.time is not None:
                    due = self.now + 0.0
                elif isinstance(y, Event):
                    y.on_fire(resume)
                    return
                elif isinstance(y, list):
                    self.all_of(y).on_fire(resume)
                    return
                else:
                    y = float(y)
                    due = self.now + (y if y > 0.0 else 0.0)
                if queue and queue[0][0] <= due:
                    self._seq += 1
                    heappush(queue, (due, self._seq, step, ()))
                    return
                self.now = due

        self.at(0.0, step)
        return finished

    def run(self) -> float:
        # A run allocates events, generator frames and queue entries by the hundred thousand, and each few hundred
        # would start the cyclic garbage collector, whose passes walk every young object still alive: a third of a
        # fit's time. Reference counting frees most of them; the cycles left wait for the collector's first pass
        # after the run. Only when memory is reclaimed changes, not what is computed.
        collecting = gc.isenabled()
        gc.disable()
        try:
            queue = self._queue
            while queue:
                t, _, fn, args = heappop(queue)
                self.now = t
                fn(*args)
        finally:
            if collecting:
                gc.enable()
        return self.now


class Fifo:
    """One resource serving jobs one at a time in arrival order (a link direction, a NIC, the stream a
    communicator's collectives run on). Jobs arrive in simulated-time order, so a job's finish is
    known when it arrives: max(now, when the previous job finishes) + its duration.

    Jobs given in bytes (`reserve_bytes`) are served at `rate` bytes/s through an optional token
    bucket (Linux tbf, as the emulated testbed shapes its links): tokens accrue at `rate` up to
    `burst` bytes while the resource idles, and bytes covered by tokens pass at `peak` bytes/s (the
    unshaped path's speed) instead of `rate`. burst = 0 is a plain link: bytes / rate."""

    __slots__ = ("burst", "busy_s", "free_at", "log", "name", "peak", "rate", "sim", "t_tokens", "tokens")

    def __init__(
        self,
        sim: Sim,
        name: str = "",
        rate: float = math.inf,
        burst: float = 0.0,
        peak: float = math.inf,
        log: bool = False,
    ):
        self.sim = sim
        self.name = name
        self.free_at = 0.0
        self.busy_s = 0.0  # utilisation: total service time
        self.rate, self.burst, self.peak = rate, burst, peak
        self.tokens, self.t_tokens = burst, 0.0
        self.log: list | None = [] if log else None  # (start, end) of every job, when asked for

    def reserve(self, duration_s: float) -> float:
        """Queue a job now; returns the simulated time it finishes."""
        d = duration_s if duration_s > 0.0 else 0.0  # max(0.0, duration_s), and max(now, free_at) below
        now, free_at = self.sim.now, self.free_at
        start = free_at if free_at > now else now
        self.free_at = end = start + d
        self.busy_s += d
        if d and self.log is not None:
            self.log.append((start, end))
        return end

    def submit(self, duration_s: float) -> Event:
        """Queue a job now; the event fires when it finishes."""
        return self.sim.timeout(self.reserve(duration_s) - self.sim.now)

    def reserve_bytes(self, nbytes: float, fixed_s: float = 0.0) -> float:
        """Queue `nbytes` now (after `fixed_s` of start-up, during which tokens still accrue); returns
        when the job finishes."""
        now, free_at = self.sim.now, self.free_at
        start = free_at if free_at > now else now  # max(now, free_at)
        if not self.burst:  # a plain link (no token bucket): the common case, kept short
            d = fixed_s + (nbytes / self.rate if nbytes > 0 else 0.0)
            self.t_tokens = self.free_at = end = start + d
            self.busy_s += d
            if d and self.log is not None:
                self.log.append((start, end))
            return end
        tokens = self._tokens_at(start + fixed_s)
        fast = min(max(0.0, nbytes), tokens)
        fast_s = fast / self.peak if fast else 0.0
        d = fixed_s + fast_s + ((nbytes - fast) / self.rate if nbytes > fast else 0.0)
        # after a partly slow job the bucket is empty (the shaper sent every token as it came)
        self.tokens = min(self.burst, tokens - fast + fast_s * self.rate) if nbytes <= fast else 0.0
        self.t_tokens = start + d
        self.free_at = start + d
        self.busy_s += d
        if self.log is not None and d:
            self.log.append((start, self.free_at))
        return self.free_at

    def submit_bytes(self, nbytes: float, fixed_s: float = 0.0) -> Event:
        return self.sim.timeout(self.reserve_bytes(nbytes, fixed_s) - self.sim.now)

    def _tokens_at(self, t: float) -> float:
        if not self.burst:
            return 0.0
        return min(self.burst, self.tokens + max(0.0, t - self.t_tokens) * self.rate)


def busy_within(fifos, lo: float, hi: float) -> tuple[float, float]:
    """(seconds in [lo, hi] during which any of the logging `fifos` was busy, seconds any was busy at all):
    their jobs' intervals merged."""
    spans = sorted(iv for f in fifos if f.log for iv in f.log)
    spans.append((math.inf, math.inf))
    inside = total = 0.0
    cur_s = cur_e = None
    for s, e in spans:  # min() and max() written out, with the values they give
        if cur_e is not None and s > cur_e:
            total += cur_e - cur_s
            part = (hi if hi < cur_e else cur_e) - (lo if lo > cur_s else cur_s)
            inside += part if part > 0.0 else 0.0
            cur_s = cur_e = None
        if s == math.inf:
            break
        if cur_s is None:
            cur_s, cur_e = s, e
        elif e > cur_e:
            cur_e = e
    return inside, total
