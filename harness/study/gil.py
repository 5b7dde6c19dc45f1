"""The GIL between a Python thread that spins over in-flight work and the threads that need the GIL back
(docs/ARCHITECTURE.md, "Predictor"): ByteScheduler's PyTorch plugin, as the study ran it.

The plugin's poller (bytescheduler/pytorch/horovod.py, ScheduledOptimizer._poll) loops `get, poll, put back`
over a queue of Horovod handles for as long as any is in flight, and its poll (`horovod_torch_poll`, a pybind11
function) keeps the GIL. A thread that needs the GIL meanwhile - the autograd thread for each gradient hook,
the training thread for each step of the forward, the scheduler thread when its credit comes back - gets it at
the first of:
  - the poller's queue emptying: `queue.get()` blocks and gives the GIL up;
  - the poller finishing an item: it then runs torch ops (`grad.set_`, the optimizer step), each of which
    gives the GIL up for its call;
  - the switch interval running out: CPython forces the switch (sys.getswitchinterval, 5 ms by default).
and then pays a hand-off (`release_s`, the wait when the holder gives the GIL up at once); with nothing in
flight the poller sleeps in `queue.get()` and the GIL is free. Both figures and the
rule are measured by `python scripts/reference/gil_handoff.py` (reports/study-prediction/gil-handoff.json):
against a spinner that keeps the GIL a thread waits the switch interval and about 0.2 ms more (`forced_s`),
against one that gives it up at every poll about 0.1 ms, and with work in flight that completes after d ms
about min(d, interval).
"""

from __future__ import annotations

from harness.sim.des import Event, Sim


class Spinner:
    """A Python poller that keeps the GIL while anything it polls is in flight (see the module docstring).
    `add` when an item enters its queue, `finish` when it has finished one (completion and its Python);
    a process that needs the GIL does `yield from spinner.acquire()`."""

    def __init__(self, sim: Sim, forced_s: float, release_s: float):
        self.sim = sim
        self.forced_s = forced_s
        """Wait for a forced switch: the switch interval plus the hand-off."""
        self.release_s = release_s
        """Wait for the GIL from a holder that gives it up at once."""
        self.inflight = 0
        self.window = Event(sim)  # fires when the poller next gives the GIL up (an item finished, or idle)
        self.waits = 0  # how many times a thread found the poller spinning
        self.waited_s = 0.0  # and how long it waited in all

    def add(self, n: int = 1) -> None:
        self.inflight += n

    def finish(self, n: int = 1) -> None:
        self.inflight -= n
        self.window = self.window.told()

    @property
    def spinning(self) -> bool:
        return self.inflight > 0

    def acquire(self):
        """Generator: wait for the GIL as a thread needing it would (`yield from spinner.acquire()`)."""
        if self.inflight <= 0 or self.forced_s <= 0:
            return  # the poller sleeps in queue.get(): the GIL is free
        t0 = self.sim.now
        got = Event(self.sim)
        self.sim.at(self.forced_s, got.fire)  # a forced switch (its hand-off included in forced_s)
        self.window.on_fire(got.fire)  # or the poller gives it up first
        yield got
        if self.sim.now - t0 < self.forced_s and self.release_s:
            yield self.release_s
        self.waits += 1
        self.waited_s += self.sim.now - t0
