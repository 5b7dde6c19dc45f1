"""Each method's schedule as a discrete-event simulation of one worker's iteration, all workers
assumed alike (same compute, same schedule: the slowest-rank iteration equals every rank's).

The plans are the real schemes' own: `merge_plan` for MG-WFBP, `partition` and `assign_servers` for
the parameter-server and ByteScheduler keys, parameter index as ByteScheduler's priority, and the
knob defaults read from the scheme registry. The framework natives follow their documented
algorithms: DDP's bucket assignment (reducer's compute_bucket_assignment_by_size, first bucket 1 MiB,
rebuilt in gradient-ready order after the first iteration) and Horovod's tensor fusion (a background
cycle that fuses whatever is ready, up to the fusion threshold).

Resources: all-reduce collectives run one at a time in issue order on one channel (one communicator,
one stream); parameter-server traffic crosses the worker node's NIC (both directions separately) and
the key's server NIC, then the server sums (a FIFO per server), then the pull crosses back.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Callable

from harness.predict.compute import ComputeModel
from harness.predict.des import Event, Fifo, Sim
from harness.predict.network import Cluster
from harness.schemes.planning import MB, assign_servers, merge_plan, partition

ELEM_BYTES = 4  # fp32 gradients (the study's and the harness's only dtype)


@dataclass
class Outcome:
    iter_s: float
    """Start of one iteration to the start of the next."""
    forward_s: float
    backward_s: float
    comm_wait_s: float
    """Blocked after backward, waiting for communication (as the timing loop measures it)."""
    optimizer_s: float
    plan: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Method:
    name: str
    """Method name (a registered scheme, or a framework native)."""
    description: str
    """One line."""
    run: Callable[..., Outcome]
    """(compute, cluster, knobs, p2p link or None) -> Outcome."""
    knobs: dict
    """name -> default."""
    parameter_server: bool = False
    """Uses the parameter servers."""
    backend: str = "torch"
    """Backend label for the rows."""


# --- shared pieces ---------------------------------------------------------------------------------------

class _PS:
    """Parameter-server resources for a cluster (one worker node represents all, by symmetry)."""

    def __init__(self, sim: Sim, cluster: Cluster, server_gbyte_s: float, p2p=None):
        self.sim = sim
        link = p2p or cluster.inter
        self.bw = link.bytes_per_s
        self.lat = link.latency_s
        self.g = cluster.workers_per_node
        self.W = cluster.workers
        self.S = cluster.n_servers
        self.sum_bw = server_gbyte_s * 1e9
        self.up, self.down = Fifo(sim, "node-up"), Fifo(sim, "node-down")
        self.s_up = [Fifo(sim, f"server{s}-up") for s in range(self.S)]
        self.s_down = [Fifo(sim, f"server{s}-down") for s in range(self.S)]
        self.s_cpu = [Fifo(sim, f"server{s}-sum") for s in range(self.S)]

    def push_pull(self, nbytes: float, server: int) -> tuple[Event, Event]:
        """(sent, done): `sent` fires when this worker's push has left its NIC (where ByteScheduler
        returns credit on PS), `done` when every worker holds the sum of this key. Push: worker NIC
        out + server NIC in; the server sums all W pushes; pull: server NIC out + worker NIC in."""
        sim, sent, done = self.sim, Event(self.sim), Event(self.sim)
        w_share, s_share = self.g * nbytes / self.bw, self.W * nbytes / self.bw

        def pull():
            end = max(self.s_up[server].reserve(s_share), self.down.reserve(w_share)) + self.lat
            sim.at(end - sim.now, done.fire)

        def add():
            sim.at(self.s_cpu[server].reserve(self.W * nbytes / self.sum_bw) - sim.now, pull)
        out = self.up.reserve(w_share)
        sim.at(out - sim.now, sent.fire)
        end = max(out, self.s_down[server].reserve(s_share)) + self.lat
        sim.at(end - sim.now, add)
        return sent, done


@functools.lru_cache(maxsize=256)
def _plan_keys(numels: tuple, part_bytes: int, servers: int):
    parts = partition(list(numels), list(range(len(numels))), ELEM_BYTES, part_bytes)
    placement = assign_servers([pt.numel for pt in parts], servers) if servers else []
    return parts, placement


def ps_parts(c: ComputeModel, partition_mb: float, servers: int):
    """The keys exactly as BucketSync/ByteScheduler declare them (partition(), priority = parameter
    index) and their servers (assign_servers(), as PSClient.declare places them). Cached: the same
    model and placement recur across methods and scales."""
    return _plan_keys(tuple(c.numels), int(partition_mb * MB), servers)


def _bucketed(c: ComputeModel, cluster: Cluster, buckets: list[list[int]] | None, ps: dict | None,
              p2p=None, plan: dict | None = None) -> Outcome:
    """BucketSync's schedule. buckets None = BSP (everything after backward, parameter order).
    All-reduce: bucket b is issued when all its tensors are ready and every earlier bucket is issued.
    PS (`ps` = knobs): a bucket's partitions are pushed as soon as its tensors are ready."""
    sim = Sim()
    n = len(c.numels)
    ab = cluster.allreduce_cost()
    chan = Fifo(sim, "collectives")
    single = cluster.workers <= 1 and ps is None
    if ps is not None:
        res = _PS(sim, cluster, ps["server_gbyte_s"], p2p)
        parts, placement = ps_parts(c, ps["partition_mb"], res.S)
        parts_of = [[] for _ in range(n)]
        for k, pt in enumerate(parts):
            parts_of[pt.param].append(k)
    order = buckets if buckets is not None else [list(range(n))]
    bucket_of = {i: b for b, m in enumerate(order) for i in m}
    handles: list = []
    issued = [False] * len(order)
    marks = {}

    def issue(b: int) -> None:
        issued[b] = True
        if single:
            return
        if ps is not None:
            for i in order[b]:
                for k in parts_of[i]:
                    handles.append(res.push_pull(parts[k].numel * ELEM_BYTES, placement[k])[1])
            return
        handles.append(chan.submit(ab.time_s(sum(c.grad_bytes[i] for i in order[b]))))

    missing = [len(m) for m in order]
    nxt = [0]

    def ready(i: int) -> None:
        b = bucket_of[i]
        missing[b] -= 1
        if ps is not None:
            if missing[b] == 0:
                issue(b)
            return
        while nxt[0] < len(order) and missing[nxt[0]] == 0:
            issue(nxt[0])
            nxt[0] += 1

    B = c.backward_total_s

    def main():
        marks["start"] = sim.now
        yield c.forward_s
        marks["bwd"] = sim.now
        if buckets is not None:
            for i in range(n):
                sim.at(min(c.ready_s[i], B), ready, i)
        yield B
        for b in range(len(order)):
            if not issued[b]:
                issue(b)
        marks["wait"] = sim.now
        yield list(handles)
        marks["opt"] = sim.now
        yield c.optimizer_s
        marks["end"] = sim.now
    sim.process(main())
    sim.run()
    out = Outcome(marks["end"] - marks["start"], c.forward_s, B, marks["opt"] - marks["wait"], c.optimizer_s,
                  dict(plan or {}))
    out.plan.setdefault("buckets", len(order))
    if ps is not None:
        out.plan.update(partitions=len(parts), servers=res.S)
    return out


def _ready_sizes(c: ComputeModel) -> list[int]:
    return [c.grad_bytes[i] for i in c.ready_order]


# --- the methods -----------------------------------------------------------------------------------------

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
    alpha = knobs.get("alpha_s") if knobs.get("alpha_s") is not None else ab.alpha_s
    beta = knobs["beta_s_per_mb"] / MB if knobs.get("beta_s_per_mb") is not None else ab.beta_s_per_byte
    groups = merge_plan(c.backward_deltas(), _ready_sizes(c), alpha, beta)
    buckets = [[c.ready_order[j] for j in g] for g in groups]
    return _bucketed(c, cluster, buckets, None, plan={"group_sizes": [len(g) for g in groups],
                                                      "alpha_s": alpha, "beta_s_per_mb": beta * MB})


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
    return _bucketed(c, cluster, None, knobs, p2p)


def wfbp_ps(c, cluster, knobs, p2p=None) -> Outcome:
    # profile_iters = 0 in the scheme: per-tensor buckets, pushed whenever ready (no common order)
    return _bucketed(c, cluster, [[i] for i in reversed(range(len(c.numels)))], knobs, p2p)


def horovod(c, cluster, knobs, p2p=None) -> Outcome:
    """Horovod's background loop: every cycle it negotiates which tensors are ready on all ranks (one
    small coordination all-reduce, the response cache's bit vector), fuses them in ready order into
    buffers of at most the fusion threshold, and enqueues their all-reduces; the optimizer waits."""
    sim = Sim()
    ab = cluster.allreduce_cost()
    chan = Fifo(sim, "collectives")
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
            for i in take + [None]:
                if i is None or (buf and size + c.grad_bytes[i] > threshold):
                    if buf:
                        fused.append(len(buf))
                        if cluster.workers > 1:
                            handles.append(chan.submit(ab.time_s(size)))
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
    return Outcome(marks["end"] - marks["start"], c.forward_s, c.backward_total_s, marks["opt"] - marks["wait"],
                   c.optimizer_s, {"fused_buffers": len(fused), "cycle_time_ms": knobs["cycle_time_ms"]})
