"""BucketSync's schedule as a simulation (BSP, WFBP, MG-WFBP on all-reduce and on parameter servers),
and torch DDP's, whose reducer issues buckets the same way: each a Model registered beside its scheme
(docs/ARCHITECTURE.md, "Predictor").

The plans are the real schemes' own: `merge_plan` for MG-WFBP, `partition` and `assign_servers` for
the parameter-server keys. DDP follows its documented bucket assignment (reducer's
compute_bucket_assignment_by_size, first bucket 1 MiB, rebuilt in gradient-ready order after the first
iteration). All-reduce collectives run one at a time in issue order on one channel (one communicator,
one stream); parameter-server traffic crosses the NICs and servers of harness.sim.ps.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from harness.grouping.cost import MB
from harness.grouping.rules import merge_plan
from harness.sim.byteps import byteps
from harness.sim.costs import hooked_ready
from harness.sim.des import Event, Fifo, Sim
from harness.sim.interference import gpu_comm_facts
from harness.sim.model import ELEM_BYTES, Outcome
from harness.sim.ps import ParameterServers, ps_parts

if TYPE_CHECKING:  # annotations only: the compute model's module reads profile tables (pandas)
    from harness.sim.links import Cluster
    from harness.sim.model import ComputeModel


def collective_channel(sim: Sim, ab, log: bool = False) -> Fifo:
    """The stream a communicator's collectives run on, one at a time: a job of m message bytes takes
    alpha + beta * m (bytes under a shaped link's token bucket at the bucket's peak rate instead).
    Submit with `allreduce(chan, ab, m)`; `log` keeps when each ran (for the interference pass)."""
    rate = 1.0 / ab.beta_s_per_byte if ab.beta_s_per_byte > 0 else math.inf
    peak = 1.0 / ab.beta_peak_s_per_byte if ab.beta_peak_s_per_byte > 0 else math.inf
    return Fifo(sim, "collectives", rate, ab.burst_bytes, peak, log=log)


def allreduce(chan: Fifo, ab, nbytes: float, extra_s: float = 0.0):
    """One all-reduce of `nbytes` on the communicator's stream (`extra_s`: device work it carries, e.g. the
    copies into and out of a fusion buffer); the event fires when it is done."""
    if ab.small is None or ab.burst_bytes:  # a shaped link keeps the byte path (its token bucket)
        return chan.submit_bytes(nbytes, ab.alpha_s + extra_s)
    return chan.submit(ab.time_s(nbytes) + extra_s)


class _BucketRun:
    """One iteration of BucketSync's schedule. buckets None = BSP (everything after backward, parameter
    order). All-reduce: bucket b is issued when all its tensors are ready and every earlier bucket is
    issued. PS (`ps` = knobs): a bucket's partitions are pushed as soon as its tensors are ready."""

    def __init__(self, c: ComputeModel, cluster: Cluster, buckets: list[list[int]] | None, ps: dict | None, p2p=None):
        self.sim = sim = Sim()
        self.c, self.buckets, self.ps = c, buckets, ps
        n = len(c.numels)
        self.ab = cluster.allreduce_cost()
        self.chan = collective_channel(sim, self.ab, log=cluster.stack.contended)
        self.single = cluster.workers <= 1 and ps is None
        if ps is not None:
            self.res = ParameterServers(sim, cluster, ps["server_gbyte_s"], p2p, ps["local_reduce"])
            self.parts, self.placement = ps_parts(c, ps["partition_mb"], self.res.S)
            self.parts_of = [[] for _ in range(n)]
            for k, pt in enumerate(self.parts):
                self.parts_of[pt.param].append(k)
        self.order = buckets if buckets is not None else [list(range(n))]
        self.bucket_of = {i: b for b, m in enumerate(self.order) for i in m}
        self.handles: list = []
        self.issued = [False] * len(self.order)
        self.missing = [len(m) for m in self.order]
        self.complete = [False] * len(self.order)  # every tensor ready (and copied in where merged)
        self.next = 0
        self.marks: dict = {}
        self.stack = stack = cluster.stack
        self.host = Fifo(sim, "host")  # the thread that issues collectives, one after another
        merged = [len(m) > 1 for m in self.order]
        self.shifted = hooked_ready(c, stack, [merged[self.bucket_of[i]] for i in range(n)])

    def issue(self, b: int) -> None:
        self.issued[b] = True
        if self.single:
            return
        if self.ps is not None:
            for i in self.order[b]:
                for k in self.parts_of[i]:
                    self.handles.append(self.res.push_pull(self.parts[k].numel * ELEM_BYTES, self.placement[k])[1])
            return
        nbytes = sum(self.c.grad_bytes[i] for i in self.order[b])
        if self.stack.launch_s:  # issued by one host thread; the collective starts once it is enqueued
            done = Event(self.sim)
            at = self.host.reserve(self.stack.launch_s)
            self.sim.at(at - self.sim.now, lambda: allreduce(self.chan, self.ab, nbytes).on_fire(done.fire))
            self.handles.append(done)
        else:
            self.handles.append(allreduce(self.chan, self.ab, nbytes))

    def ready(self, i: int) -> None:
        b = self.bucket_of[i]
        self.missing[b] -= 1
        if self.missing[b] == 0:
            self.complete[b] = True
        if self.ps is not None:
            if self.missing[b] == 0:
                self.issue(b)
            return
        if self.stack.negotiation_s:
            return  # the negotiation rounds issue it (negotiate)
        while self.next < len(self.order) and self.missing[self.next] == 0:
            self.issue(self.next)
            self.next += 1

    def negotiate(self):
        """Horovod with the response cache off and cycle time 0: coordinator rounds back to back from the start
        of backward; the buckets complete (on every rank: all alike) when a round begins are issued as it ends,
        in order. Rounds are `negotiation_s` apart, so a bucket is issued at the end of the first round that
        begins once it and every bucket before it are complete: one event per issue time, not per round."""
        neg, t0 = self.stack.negotiation_s, self.sim.now
        times, latest = [], t0
        for b in range(len(self.order)):
            latest = max(latest, self.complete_at[b])
            first = math.ceil((latest - t0) / neg * (1 - 1e-12))  # the first round beginning at or after it
            times.append(t0 + (first + 1) * neg)
        b = 0
        while b < len(times):
            t = times[b]
            yield max(0.0, t - self.sim.now)
            while b < len(times) and times[b] == t:
                self.issue(b)
                b += 1
            self.next = b

    def main(self):
        c, sim, marks = self.c, self.sim, self.marks
        ready, B = self.shifted
        marks["start"] = sim.now
        yield c.forward_s
        marks["bwd"] = sim.now
        if self.buckets is not None or self.stack.negotiation_s:
            self.complete_at = [sim.now] * len(self.order)
            for i in range(len(c.numels)):
                sim.at(min(ready[i], B), self.ready, i)
                b = self.bucket_of[i]
                self.complete_at[b] = max(self.complete_at[b], sim.now + min(ready[i], B))
        if self.stack.negotiation_s and not self.single and self.ps is None:
            sim.process(self.negotiate())
        yield B
        if self.stack.negotiation_s and not self.single and self.ps is None:
            while not all(self.issued):
                yield self.sim.timeout(self.stack.negotiation_s)
        for b in range(len(self.order)):
            if not self.issued[b]:
                self.issue(b)
        marks["wait"] = sim.now
        yield list(self.handles)
        if self.stack.copy_back and self.ps is None and not self.single:  # each merged buffer back into its grads
            back = sum(self.stack.copy_s(sum(c.grad_bytes[i] for i in m)) for m in self.order if len(m) > 1)
            if back:
                yield back
        marks["opt"] = sim.now
        yield c.optimizer_s
        marks["end"] = sim.now

    def run(self, plan: dict | None) -> Outcome:
        self.sim.process(self.main())
        self.sim.run()
        m, c = self.marks, self.c
        out = Outcome(
            m["end"] - m["start"], c.forward_s, self.shifted[1], m["opt"] - m["wait"], c.optimizer_s, dict(plan or {})
        )
        out.plan.setdefault("buckets", len(self.order))
        if self.chan.log is not None:
            out.plan.update(gpu_comm_facts([self.chan], m["bwd"], m["bwd"] + self.shifted[1]))
        if self.ps is not None:
            out.plan.update(partitions=len(self.parts), servers=self.res.S)
        return out


def _bucketed(
    c: ComputeModel,
    cluster: Cluster,
    buckets: list[list[int]] | None,
    ps: dict | None,
    p2p=None,
    plan: dict | None = None,
) -> Outcome:
    return _BucketRun(c, cluster, buckets, ps, p2p).run(plan)


def _ready_sizes(c: ComputeModel) -> list[int]:
    return [c.grad_bytes[i] for i in c.ready_order]


# --- the models ------------------------------------------------------------------------------------------


def local(c, cluster, knobs, p2p=None) -> Outcome:
    return Outcome(c.iteration_s, c.forward_s, c.backward_total_s, 0.0, c.optimizer_s, {})


def bsp_a2a(c, cluster, knobs, p2p=None) -> Outcome:
    return _bucketed(c, cluster, None, None)


def wfbp_a2a(c, cluster, knobs, p2p=None) -> Outcome:
    return _bucketed(c, cluster, [[i] for i in c.ready_order], None)


def mgwfbp(c, cluster, knobs, p2p=None) -> Outcome:
    """merge_plan on the profiled backward and this cluster's all-reduce alpha/beta (the scheme
    measures both on its own workers at start-up; knobs override as they do in the scheme)."""
    ab = cluster.allreduce_cost()
    ab = ab.planning or ab  # what the scheme's own start-up probe fits on this network
    alpha = knobs.get("alpha_s") if knobs.get("alpha_s") is not None else ab.alpha_s
    beta = knobs["beta_s_per_mb"] / MB if knobs.get("beta_s_per_mb") is not None else ab.beta_s_per_byte
    if cluster.stack.mgwfbp_merge is not None:  # a framework's own rule (Stack.mgwfbp_merge)
        groups = cluster.stack.mgwfbp_merge(c.backward_deltas(), [c.numels[i] for i in c.ready_order], alpha, beta)
    else:
        groups = merge_plan(c.backward_deltas(), _ready_sizes(c), alpha, beta)
    buckets = [[c.ready_order[j] for j in g] for g in groups]
    return _bucketed(
        c,
        cluster,
        buckets,
        None,
        plan={"group_sizes": [len(g) for g in groups], "alpha_s": alpha, "beta_s_per_mb": beta * MB},
    )


def ddp_buckets(order: list[int], sizes: dict | list, cap_bytes: float, first_bytes: float = MB) -> list[list[int]]:
    """torch DDP's bucket assignment (reducer.cpp compute_bucket_assignment_by_size): walk the
    tensors (here in gradient-ready order, as DDP rebuilds them after the first iteration); a bucket
    closes once its size reaches the limit; the first bucket's limit is 1 MiB
    (dist._DEFAULT_FIRST_BUCKET_BYTES), the others' bucket_cap_mb."""
    buckets, cur, size = [], [], 0
    limit = first_bytes
    for i in order:
        cur.append(i)
        size += sizes[i]
        if size >= limit:
            buckets.append(cur)
            cur, size, limit = [], 0, cap_bytes
    if cur:
        buckets.append(cur)
    return buckets


def ddp(c, cluster, knobs, p2p=None) -> Outcome:
    buckets = ddp_buckets(list(c.ready_order), c.grad_bytes, knobs["bucket_cap_mb"] * MB)
    return _bucketed(c, cluster, buckets, None, plan={"bucket_sizes": [len(b) for b in buckets]})


def bsp_ps(c, cluster, knobs, p2p=None) -> Outcome:
    if cluster.stack.byteps is not None:  # the study's: BytePS, one fused tensor
        return byteps(c, cluster, knobs, fused=True)
    return _bucketed(c, cluster, None, knobs, p2p)


def wfbp_ps_runs(cluster, knobs) -> tuple | None:
    """What `wfbp_ps` runs on a BytePS stack (Model.runs): BytePS's pipeline, every tensor as it is ready."""
    return ("byteps", False, knobs["partition_mb"]) if cluster.stack.byteps is not None else None


def wfbp_ps(c, cluster, knobs, p2p=None) -> Outcome:
    if cluster.stack.byteps is not None:  # the study's: BytePS, every tensor as it is ready
        return byteps(c, cluster, knobs, fused=False)
    # profile_iters = 0 in the scheme: per-tensor buckets, pushed whenever ready (no common order)
    return _bucketed(c, cluster, [[i] for i in reversed(range(len(c.numels)))], knobs, p2p)
