"""Horovod's tensor fusion as a simulation (the model registered beside the `horovod` scheme,
docs/ARCHITECTURE.md, "Predictor"): a background cycle that fuses whatever is ready, up to the fusion
threshold (horovod/common/operations.cc, tensor_queue.cc), on one collective channel."""

from __future__ import annotations

from harness.grouping.cost import MB
from harness.sim.bucketed import collective_channel
from harness.sim.des import Sim
from harness.sim.model import Outcome


def horovod(c, cluster, knobs, p2p=None) -> Outcome:  # noqa: C901 - Horovod's background loop step for step
    """Horovod's background loop: every cycle it negotiates which tensors are ready on all ranks (one
    small coordination all-reduce, the response cache's bit vector), fuses them in ready order into
    buffers of at most the fusion threshold, and enqueues their all-reduces; the optimizer waits."""
    sim = Sim()
    ab = cluster.allreduce_cost()
    chan = collective_channel(sim, ab)
    cycle = knobs["cycle_time_ms"] / 1000.0
    threshold = knobs["fusion_threshold_mb"] * MB
    n = len(c.numels)
    ready_q: list[int] = []
    handles: list = []
    marks, fused = {}, []

    def loop():
        sent = 0
        while sent < n:
            t0 = sim.now
            if cluster.workers > 1:
                yield ab.time_s(n / 8)  # the readiness bit vector
            take, ready_q[:] = list(ready_q), []
            buf, size = [], 0
            for i in [*take, None]:
                if i is None or (buf and size + c.grad_bytes[i] > threshold):
                    if buf:
                        fused.append(len(buf))
                        if cluster.workers > 1:
                            handles.append(chan.submit_bytes(size, ab.alpha_s))
                    buf, size = [], 0
                if i is not None:
                    buf.append(i)
                    size += c.grad_bytes[i]
            sent += len(take)
            if sent < n:
                yield max(0.0, t0 + cycle - sim.now)

    def main():
        marks["start"] = sim.now
        yield c.forward_s
        for i in range(n):
            sim.at(min(c.ready_s[i], c.backward_total_s), ready_q.append, i)
        done = sim.process(loop())
        yield c.backward_total_s
        marks["wait"] = sim.now
        yield done
        yield list(handles)
        marks["opt"] = sim.now
        yield c.optimizer_s
        marks["end"] = sim.now

    sim.process(main())
    sim.run()
    return Outcome(
        marks["end"] - marks["start"],
        c.forward_s,
        c.backward_total_s,
        marks["opt"] - marks["wait"],
        c.optimizer_s,
        {"fused_buffers": len(fused), "cycle_time_ms": knobs["cycle_time_ms"]},
    )
