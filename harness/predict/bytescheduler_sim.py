"""ByteScheduler (harness.schemes.bytescheduler) as a simulation: the same partitions and priorities,
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

from harness.predict.compute import ComputeModel
from harness.predict.des import Event, Sim
from harness.predict.methods import ELEM_BYTES, Outcome, _PS, collective_channel, ps_parts
from harness.predict.network import Cluster
from harness.planning import MB


def bytescheduler(c: ComputeModel, cluster: Cluster, knobs: dict, use_ps: bool = False, p2p=None) -> Outcome:
    sim = Sim()
    n = len(c.numels)
    # Priority: parameter index (model definition order, input side first), as in the engine.
    servers = cluster.n_servers if use_ps else 0
    parts, placement = ps_parts(c, knobs["partition_mb"], servers)
    part_bytes = [pt.numel * ELEM_BYTES for pt in parts]
    rank = sorted(range(len(parts)), key=lambda k: (parts[k].priority, k))
    urgency = {k: r for r, k in enumerate(rank)}
    parts_of = [[] for _ in range(n)]
    for k, pt in enumerate(parts):
        parts_of[pt.param].append(k)
    credit = knobs["credit_mb"] * MB
    ab = cluster.allreduce_cost()
    workers = cluster.workers
    consensus = not use_ps and workers > 1
    consensus_s = ab.time_s(len(parts)) if consensus else 0.0
    chan = collective_channel(sim, ab)
    if use_ps:
        res = _PS(sim, cluster, knobs["server_gbyte_s"], p2p)

    def send(k: int) -> tuple[Event, Event]:
        """(credit returned, done)."""
        if use_ps:
            return res.push_pull(part_bytes[k], placement[k])
        ev = sim.timeout(0.0) if workers <= 1 else chan.submit_bytes(part_bytes[k], ab.alpha_s)
        return ev, ev

    stats = {"consensus_calls": 0}

    class Round:
        def __init__(self):
            self.ready_seq: list[int] = []       # partitions in the order they became ready
            self.is_ready = [False] * len(parts)
            self.news = Event(sim)
            self.done = [Event(sim) for _ in parts]

        def mark(self, ks) -> None:
            new = [k for k in ks if not self.is_ready[k]]
            if not new:
                return
            for k in new:
                self.is_ready[k] = True
            self.ready_seq.extend(new)
            news, self.news = self.news, Event(sim)
            news.fire()

    def scheduler(r: Round):
        agreed_upto = 0                  # ready_seq[:agreed_upto] has been agreed
        heap: list[int] = []             # urgencies of agreed-ready, unsent partitions
        inflight: deque = deque()
        pulling: list = []               # PS: credit returned, pull outstanding
        in_bytes = 0.0
        remaining = len(parts)
        while remaining:
            if not heap:
                while len(r.ready_seq) <= agreed_upto:
                    yield r.news
            snapshot = len(r.ready_seq)
            if consensus:
                stats["consensus_calls"] += 1
                yield consensus_s
            for k in r.ready_seq[agreed_upto:snapshot]:
                heapq.heappush(heap, urgency[k])
            agreed_upto = snapshot
            while heap:
                k = rank[heap[0]]
                if inflight and in_bytes + part_bytes[k] > credit:
                    break
                heapq.heappop(heap)
                inflight.append((k, send(k)))
                in_bytes += part_bytes[k]
                remaining -= 1
            if remaining and heap and inflight:
                k, (credit_back, done) = inflight.popleft()
                yield credit_back
                in_bytes -= part_bytes[k]
                if use_ps:
                    pulling.append((k, (credit_back, done)))
                else:
                    r.done[k].fire()
        for k, (_, done) in pulling + list(inflight):
            yield done
            r.done[k].fire()

    marks: dict = {}

    def main():
        prev = None
        fwd = []
        for it in range(2):
            t0 = sim.now
            marks[f"start{it}"] = t0
            for j, members in enumerate(c.layers):
                if prev is not None:
                    yield [prev.done[k] for i in members for k in parts_of[i]]
                    yield c.layer_optimizer_s[j]
                yield c.layer_forward_s[j]
            fwd.append(sim.now - t0)
            r = Round()
            sim.process(scheduler(r))
            for i in range(n):
                sim.at(min(c.ready_s[i], c.backward_total_s), r.mark, parts_of[i])
            yield c.backward_total_s
            r.mark([k for k in range(len(parts))])  # after_backward: everything counts as ready
            marks[f"end{it}"] = sim.now
            prev = r
        marks["fwd"] = fwd[-1]
    sim.process(main())
    sim.run()
    iter_s = marks["end1"] - marks["end0"]
    return Outcome(iter_s, marks["fwd"], c.backward_total_s, 0.0, 0.0,
                   {"partitions": len(parts), "credit_mb": knobs["credit_mb"], "partition_mb": knobs["partition_mb"],
                    "consensus_calls_per_iter": stats["consensus_calls"] / 2,  # two rounds were simulated
                    "consensus_s_per_iter": stats["consensus_calls"] / 2 * consensus_s, "layers": len(c.layers)})
