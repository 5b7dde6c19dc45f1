"""ByteScheduler's scheduler as a simulation: ddlbench's engine (harness.schemes.bytescheduler), the base the
2019 library's PyTorch plugin (harness/study/bytescheduler_plugin.py) builds on; harness/sim/bytescheduler.py holds
the models registered beside the bytescheduler-a2a and -ps schemes. The same partitions and priorities,
the same credit window and the same scheduler loop, and the next forward waiting layer by layer.

The scheduler loop mirrored from ByteSchedulerEngine._run_round:
  - wait for news only when no agreed-ready partition is left to send;
  - on all-reduce with > 1 worker, agree on readiness first (one small MIN all-reduce of a readiness
    mask: its cost is charged to the scheduler thread, on a path apart from the data channel, as on
    GPUs where the CPU mask goes over gloo and the data over NCCL; on CPU/gloo both share one queue);
  - send the most urgent agreed-ready partitions while the bytes in flight fit the credit (always at
    least one), stopping at the first that does not fit;
  - when credit blocks a ready partition, wait for the OLDEST in flight and free it: on all-reduce
    when it completes (its `done` fires then, not when its bytes landed), on PS when its push has
    left the worker (the pull is then waited for only after the last dispatch);
  - after the last dispatch, wait for the rest: PS pulls in the order their credit was returned,
    then what is still in flight, in dispatch order.
The main thread: forward layer by layer, each layer first waiting for its partitions of the previous
round and applying its optimizer step; backward marks partitions ready as their gradients are.
Iteration time = end of backward 1 - end of backward 0 (the steady state: round 0 was sent during
backward 0 exactly as every later round is).
"""

from __future__ import annotations

import heapq
from collections import deque
from typing import TYPE_CHECKING

from harness.grouping.cost import MB
from harness.sim.bucketed import allreduce, collective_channel
from harness.sim.des import Event, Fifo, Sim
from harness.sim.interference import gpu_comm_facts
from harness.sim.model import ELEM_BYTES, Outcome
from harness.sim.ps import ParameterServers, ps_parts

if TYPE_CHECKING:  # annotations only
    from harness.sim.links import Cluster
    from harness.sim.model import ComputeModel


ENGINE_HANDOFF_S = 0.08e-3
"""ddlbench's engine: its scheduler thread waits on a Condition (harness/schemes/bytescheduler.py) and, woken,
needs the GIL back from the training thread, which gives it up at its next torch call: 0.073-0.103 ms on this
machine (`python scripts/reference/gil_handoff.py`, a spinner that releases the GIL, 2026-11-26;
reports/study-prediction/gil-handoff.json). It never spins holding the GIL (gloo's waits block; NCCL's
completion polls sleep between polls: harness/backends/torch_dist/handles.py), so there is no convoy."""


class Round:
    """One round of partitions: which are ready (in the order they became so), and when each is done."""

    def __init__(self, sim: Sim, n_parts: int):
        self.sim = sim
        self.ready_seq: list[int] = []  # partitions in the order they became ready
        self.is_ready = [False] * n_parts
        self.news = Event(sim)
        self.done = [Event(sim) for _ in range(n_parts)]

    def mark(self, ks) -> None:
        new = [k for k in ks if not self.is_ready[k]]
        if not new:
            return
        for k in new:
            self.is_ready[k] = True
        self.ready_seq.extend(new)
        self.news = self.news.told()


class ByteSchedulerRun:
    def __init__(self, c: ComputeModel, cluster: Cluster, knobs: dict, use_ps: bool, p2p=None):
        self.sim = sim = Sim()
        self.c, self.knobs, self.use_ps = c, knobs, use_ps
        # Priority: parameter index (model definition order, input side first), as in the engine.
        servers = cluster.n_servers if use_ps else 0
        self.parts, self.placement = ps_parts(c, knobs["partition_mb"], servers)
        self.part_bytes = [pt.numel * ELEM_BYTES for pt in self.parts]
        self.rank = sorted(range(len(self.parts)), key=lambda k: (self.parts[k].priority, k))
        self.urgency = {k: r for r, k in enumerate(self.rank)}
        self.parts_of = [[] for _ in range(len(c.numels))]
        for k, pt in enumerate(self.parts):
            self.parts_of[pt.param].append(k)
        self.credit = knobs["credit_mb"] * MB
        self.ab = cluster.allreduce_cost()
        self.workers = cluster.workers
        self.stack = stack = cluster.stack
        self.consensus = stack.consensus and not use_ps and self.workers > 1
        self.ticks = stack.cycle_s > 0 and not use_ps and self.workers > 1  # Horovod's cycle under it
        self.pending: list = []  # (partition bytes, done event) waiting for Horovod's next tick
        self.tick_news = Event(sim)
        self.poller = Fifo(sim, "poller")  # the library's poller thread: the optimizer step per parameter
        self.consensus_s = self.ab.time_s(len(self.parts)) if self.consensus else 0.0
        self.chan = collective_channel(sim, self.ab, log=stack.contended)
        if use_ps:
            self.res = ParameterServers(sim, cluster, knobs["server_gbyte_s"], p2p, knobs["local_reduce"])
        self.consensus_calls = 0
        self.marks: dict = {}
        # the scheduler is a Python thread beside the training thread: every time it wakes (news, credit back)
        # it takes the GIL back from a thread that gives it up at its next torch call (a hand-off)
        self.handoff = (stack.gil_release_s or ENGINE_HANDOFF_S) if self.workers > 1 or use_ps else 0.0

    def send(self, k: int, r: Round) -> tuple[Event, Event]:
        """(credit returned, done) of partition k of round r, dispatched now."""
        if self.use_ps:
            return self.res.push_pull(self.part_bytes[k], self.placement[k])
        if self.workers <= 1:
            ev = self.sim.timeout(0.0)
        elif self.ticks:
            ev = Event(self.sim)
            self.pending.append((self.part_bytes[k], ev))
            self.tick_news = self.tick_news.told()
        else:
            ev = allreduce(self.chan, self.ab, self.part_bytes[k])
        return ev, ev

    def horovod(self):
        """The Horovod under the library: at each tick of its cycle, with partitions waiting, the cache's
        bit-vector all-reduce, then the waiting partitions fused in order up to the fusion buffer, one
        collective per buffer (with the copies into and out of it)."""
        st = self.stack
        while True:
            while not self.pending:
                yield self.tick_news
            yield st.cycle_s - (self.sim.now % st.cycle_s)  # the next tick
            yield st.cycle_sync_s
            take, self.pending = self.pending, []
            buf: list = []
            for nbytes, ev in [*take, (None, None)]:
                if buf and (nbytes is None or sum(b for b, _ in buf) + nbytes > st.fusion_bytes):
                    size = sum(b for b, _ in buf)
                    extra = 2 * st.copy_s(size) if len(buf) > 1 else 0.0
                    done = allreduce(self.chan, self.ab, size, extra)
                    for _, e in buf:
                        done.on_fire(e.fire)
                    buf = []
                if nbytes is not None:
                    buf.append((nbytes, ev))

    def scheduler(self, r: Round):  # noqa: C901 - schemes/bytescheduler.py's _run_round step for step
        """ByteSchedulerEngine._run_round, step for step (see the module docstring)."""
        agreed_upto = 0  # ready_seq[:agreed_upto] has been agreed
        heap: list[int] = []  # urgencies of agreed-ready, unsent partitions
        inflight: deque = deque()
        pulling: list = []  # PS: credit returned, pull outstanding
        in_bytes = 0.0
        remaining = len(self.parts)
        while remaining:
            if not heap and len(r.ready_seq) <= agreed_upto:
                while len(r.ready_seq) <= agreed_upto:
                    yield r.news
                yield self.handoff  # woken, the thread takes the GIL back from the training thread
            snapshot = len(r.ready_seq)
            if self.consensus:
                self.consensus_calls += 1
                yield self.consensus_s
            for k in r.ready_seq[agreed_upto:snapshot]:
                heapq.heappush(heap, self.urgency[k])
            agreed_upto = snapshot
            while heap:
                k = self.rank[heap[0]]
                full = (
                    in_bytes >= self.credit
                    if self.stack.credit_overshoot
                    else in_bytes + self.part_bytes[k] > self.credit
                )
                if inflight and full:
                    break
                heapq.heappop(heap)
                if self.stack.partition_cpu_s:
                    yield self.stack.partition_cpu_s
                inflight.append((k, self.send(k, r)))
                in_bytes += self.part_bytes[k]
                remaining -= 1
            if remaining and heap and inflight:
                k, (credit_back, done) = inflight.popleft()
                yield credit_back
                yield self.handoff
                in_bytes -= self.part_bytes[k]
                if self.use_ps:
                    pulling.append((k, (credit_back, done)))
                else:
                    r.done[k].fire()
        for k, (_, done) in pulling + list(inflight):
            yield done
            r.done[k].fire()

    def watch_updates(self, r: Round) -> None:
        """The library's poller: once every partition of a parameter is done, it steps that parameter's
        optimizer (its Python step and the parameter's share of the device's update), one after another."""
        c, sim = self.c, self.sim
        r.updated = [Event(sim) for _ in c.numels]
        share = {i: c.layer_optimizer_s[j] / len(m) for j, m in enumerate(c.layers) for i in m}
        for i, parts in enumerate(self.parts_of):
            left = [len(parts)]

            def one(i=i, left=left):
                left[0] -= 1
                if left[0] == 0:
                    at = self.poller.reserve(self.stack.param_step_s + share.get(i, 0.0))
                    sim.at(at - sim.now, r.updated[i].fire)

            for k in parts:
                r.done[k].on_fire(one)
            if not parts:
                r.updated[i].fire()

    def main(self):
        """Two iterations: forward layer by layer (each layer waits for its partitions of the previous
        round, then steps), backward marking partitions ready."""
        c, sim, marks = self.c, self.sim, self.marks
        prev = None
        fwd = []
        for it in range(2):
            t0 = sim.now
            marks[f"start{it}"] = t0
            for j, members in enumerate(c.layers):
                if prev is not None and self.stack.param_step_s:  # stepped by the poller thread
                    yield [prev.updated[i] for i in members]
                elif prev is not None:
                    yield [prev.done[k] for i in members for k in self.parts_of[i]]
                    yield c.layer_optimizer_s[j]
                yield c.layer_forward_s[j]
            fwd.append(sim.now - t0)
            r = Round(sim, len(self.parts))
            if self.stack.param_step_s:
                self.watch_updates(r)
            sim.process(self.scheduler(r))
            marks[f"bwd{it}"] = sim.now
            for i in range(len(c.numels)):
                sim.at(min(c.ready_s[i], c.backward_total_s), r.mark, self.parts_of[i])
            yield c.backward_total_s
            r.mark([k for k in range(len(self.parts))])  # after_backward: everything counts as ready
            marks[f"end{it}"] = sim.now
            prev = r
        marks["fwd"] = fwd[-1]

    def run(self) -> Outcome:
        if self.ticks:
            self.sim.process(self.horovod())
        self.sim.process(self.main())
        self.sim.run()
        m, knobs, calls = self.marks, self.knobs, self.consensus_calls / 2  # two rounds were simulated
        return Outcome(
            m["end1"] - m["end0"],
            m["fwd"],
            self.marks.get("bwd", self.c.backward_total_s),
            0.0,
            0.0,
            {
                "partitions": len(self.parts),
                "credit_mb": knobs["credit_mb"],
                "partition_mb": knobs["partition_mb"],
                "consensus_calls_per_iter": calls,
                "consensus_s_per_iter": calls * self.consensus_s,
                "layers": len(self.c.layers),
                **self.plan_extra(),
            },
        )

    def plan_extra(self) -> dict:
        """What a variant adds to the plan facts: the GPU-side communication's overlap with the steady
        backward when the interference pass asks for it."""
        if self.chan.log is None:
            return {}
        return gpu_comm_facts(
            [self.chan], self.marks["bwd1"], self.marks["bwd1"] + self.marks.get("bwd", self.c.backward_total_s)
        )
