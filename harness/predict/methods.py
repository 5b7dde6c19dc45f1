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
import math
from dataclasses import dataclass, field
from typing import Callable

from harness.predict.compute import ComputeModel
from harness.predict.des import Event, Fifo, Sim
from harness.predict.network import Cluster
from harness.planning import MB, assign_servers, merge_plan, partition

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
    """Parameter-server resources for a cluster.

    Dedicated server hosts (the study's layout): one worker node represents all, by symmetry; its NIC
    carries its g workers' pushes and pulls, each server's NIC the pushes and pulls of all W workers
    for its keys. Co-located servers (server s on worker host s mod nodes, as on a testbed with no
    spare host): the symmetry is gone, so every node's NIC is a resource of its own; the server's
    host pushes and pulls through loopback (no NIC time) while its NIC carries the other workers'
    traffic beside its own workers' traffic to the other servers."""

    def __init__(self, sim: Sim, cluster: Cluster, server_gbyte_s: float, p2p=None):
        self.sim = sim
        link = p2p or cluster.inter
        self.bw = link.bytes_per_s
        self.lat = link.latency_s
        self.g = cluster.workers_per_node
        self.W = cluster.workers
        self.S = cluster.n_servers
        self.colocated = cluster.server_hosts == "colocated"
        self.nodes = cluster.nodes
        self.sum_bw = server_gbyte_s * 1e9
        def nic(name):
            return Fifo(sim, name, self.bw, link.burst_bytes, link.peak_bytes_per_s)
        if self.colocated:
            self.n_up = [nic(f"node{n}-up") for n in range(self.nodes)]
            self.n_down = [nic(f"node{n}-down") for n in range(self.nodes)]
        else:
            self.up, self.down = nic("node-up"), nic("node-down")
            self.s_up = [nic(f"server{s}-up") for s in range(self.S)]
            self.s_down = [nic(f"server{s}-down") for s in range(self.S)]
        self.s_cpu = [Fifo(sim, f"server{s}-sum") for s in range(self.S)]

    def push_pull(self, nbytes: float, server: int) -> tuple[Event, Event]:
        """(sent, done): `sent` fires when this worker's push has left its NIC (where ByteScheduler
        returns credit on PS), `done` when every worker holds the sum of this key. Push: worker NIC
        out + server NIC in; the server sums all W pushes; pull: server NIC out + worker NIC in."""
        if self.colocated:
            return self._push_pull_colocated(nbytes, server)
        sim, sent, done = self.sim, Event(self.sim), Event(self.sim)
        w_share, s_share = self.g * nbytes, self.W * nbytes

        def pull():
            end = max(self.s_up[server].reserve_bytes(s_share), self.down.reserve_bytes(w_share)) + self.lat
            sim.at(end - sim.now, done.fire)

        def add():
            sim.at(self.s_cpu[server].reserve(self.W * nbytes / self.sum_bw) - sim.now, pull)
        out = self.up.reserve_bytes(w_share)
        sim.at(out - sim.now, sent.fire)
        end = max(out, self.s_down[server].reserve_bytes(s_share)) + self.lat
        sim.at(end - sim.now, add)
        return sent, done

    def _push_pull_colocated(self, nbytes: float, server: int) -> tuple[Event, Event]:
        """Every node pushes at once (all workers run the same schedule); `sent` and `done` are the
        slowest node's, as every rank waits for the slowest."""
        sim, sent, done = self.sim, Event(self.sim), Event(self.sim)
        home = server % self.nodes
        remote = [n for n in range(self.nodes) if n != home]
        share = self.g * nbytes
        outs = [self.n_up[n].reserve_bytes(share) for n in remote]
        inn = self.n_down[home].reserve_bytes(share * len(remote)) if remote else sim.now
        sim.at(max(outs, default=sim.now) - sim.now, sent.fire)
        lat = self.lat if remote else 0.0

        def pull():
            ends = [self.n_down[n].reserve_bytes(share) for n in remote]
            end = max([self.n_up[home].reserve_bytes(share * len(remote)) if remote else sim.now] + ends) + lat
            sim.at(end - sim.now, done.fire)

        def add():
            sim.at(self.s_cpu[server].reserve(self.W * nbytes / self.sum_bw) - sim.now, pull)
        sim.at(max(outs + [inn]) + lat - sim.now, add)
        return sent, done


def collective_channel(sim: Sim, ab) -> Fifo:
    """The stream a communicator's collectives run on, one at a time: a job of m message bytes takes
    alpha + beta * m (bytes under a shaped link's token bucket at the bucket's peak rate instead).
    Submit with `chan.submit_bytes(m, ab.alpha_s)`."""
    rate = 1.0 / ab.beta_s_per_byte if ab.beta_s_per_byte > 0 else math.inf
    peak = 1.0 / ab.beta_peak_s_per_byte if ab.beta_peak_s_per_byte > 0 else math.inf
    return Fifo(sim, "collectives", rate, ab.burst_bytes, peak)


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
    chan = collective_channel(sim, ab)
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
        handles.append(chan.submit_bytes(sum(c.grad_bytes[i] for i in order[b]), ab.alpha_s))

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
    ab = ab.planning or ab  # what the scheme's own start-up probe fits on this network
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
            for i in take + [None]:
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
    return Outcome(marks["end"] - marks["start"], c.forward_s, c.backward_total_s, marks["opt"] - marks["wait"],
                   c.optimizer_s, {"fused_buffers": len(fused), "cycle_time_ms": knobs["cycle_time_ms"]})


# --- the parameter-server link from a push-pull benchmark ------------------------------------------------

def _pushpull_s(cluster: Cluster, link, size: int, part: int, server_gbyte_s: float) -> float:
    """Simulated time of one `ddlbench commbench --collective pushpull` repetition: `size` bytes as one
    key (below a partition) or as size // part keys of `part` bytes, all pushed at once, every worker
    waiting for every pull."""
    from harness.planning import assign_servers

    sim = Sim()
    ps = _PS(sim, cluster, server_gbyte_s, link)
    keys = [size] if size < part else [part] * (size // part)
    where = assign_servers(keys, ps.S)
    done = [ps.push_pull(k, s)[1] for k, s in zip(keys, where)]

    def main():
        yield done
    sim.process(main())
    return sim.run()


def ps_link_from_pushpull(times: dict[int, float], small_mean_s: float, cluster: Cluster, part: int,
                          server_gbyte_s: float, burst_bytes: float = 0.0, peak_gbit_s: float = math.inf):
    """The point-to-point link that makes the simulated parameter server reproduce a measured push-pull
    benchmark on `cluster`'s layout (workers, servers, where the servers sit): latency = half the mean
    small-message push-pull (a push and a pull), rate from the slope between the two largest sizes
    (the simulator's slope at a trial rate, scaled: transfer time is linear in 1 / rate). Like
    link_from_allreduce inverts the ring model, this inverts the PS model, so whatever the real
    transport adds per byte (both directions sharing one connection, the server's receive threads)
    is carried into the prediction. times: size -> median seconds (sizes past the token bucket)."""
    from harness.predict.network import Link

    big = sorted(s for s in times if s >= 2 * part)[-2:]
    if len(big) < 2:
        raise ValueError("need two push-pull sizes of at least two partitions")
    lat = small_mean_s / 2
    trial = Link("trial", 1.0, lat)
    sim_slope = (_pushpull_s(cluster, trial, big[1], part, server_gbyte_s)
                 - _pushpull_s(cluster, trial, big[0], part, server_gbyte_s)) / (big[1] - big[0])
    measured_slope = (times[big[1]] - times[big[0]]) / (big[1] - big[0])
    if measured_slope <= 0:
        raise ValueError("push-pull times do not grow with the size")
    rate = sim_slope / measured_slope
    return Link("commbench-pushpull", rate, lat,
                f"fitted to push-pull times on {cluster.nodes} hosts x {cluster.workers_per_node}, "
                f"{cluster.n_servers} server(s) {cluster.server_hosts}", burst_bytes, max(peak_gbit_s, rate))
