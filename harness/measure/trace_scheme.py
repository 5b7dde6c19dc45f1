"""The scheme as the timing loop sees it in a traced cell (docs/ARCHITECTURE.md, "Traces"): each phase of
the loop timed for harness/measure/trace.py's Tracer; everything else passes through to the scheme."""

from __future__ import annotations

from harness.measure.trace_transport import now


class TracedScheme:
    """The scheme as the loop sees it while tracing: each phase timed; everything else passes through."""

    def __init__(self, inner, tracer):
        self._inner, self._tracer = inner, tracer

    def __getattr__(self, name):
        return getattr(self._inner, name)

    def _timed(self, lane: str, name: str, fn, *args):
        t0 = now()
        out = fn(*args)
        if self._tracer.recording:
            self._tracer.add(lane, name, t0, now(), phase=True)
        return out

    def before_backward(self):
        tr = self._tracer
        self._t_bwd = now()
        tr.comm_iteration = tr.iteration
        if tr.recording:
            tr.add("compute", "forward", tr.iter_starts[-1], self._t_bwd, phase=True)
        self._inner.before_backward()

    def backward(self, loss):
        self._inner.backward(loss)

    def after_backward(self):
        self._inner.after_backward()
        tr = self._tracer
        tr._close_backward(now())
        if tr.recording:
            tr.add("compute", "backward", self._t_bwd, now(), phase=True)

    def wait(self):
        self._timed("wait", "comm_wait", self._inner.wait)

    def step(self):
        self._timed("compute", "optimizer", self._inner.step)

    def flush(self):
        self._inner.flush()
        self._tracer.finish()
