"""BytePS's data path as a simulation (the parameter-server methods as the study ran them: BytePS 0.2 with
dedicated server hosts; docs/ARCHITECTURE.md, "Predictor"). The same keys and readiness as the PS schemes
(`bucketed`'s BSP: one fused tensor after backward; WFBP: each tensor as its gradient is ready), the
pipeline per partition as byteps/common/core_loops.cc runs it, each stage a thread of its own, so stages of
different partitions overlap:

  one node (BytePS "non-distributed", one worker node: no server at all): a NCCL reduce-scatter among the
  node's GPUs, then an all-gather (both on the root's NCCL stream, one after another);
  several nodes: reduce-scatter; each GPU copies its 1/g of the partition to host memory (COPYD2H);
  the root pushes the whole partition to its server (ZMQ over TCP, or RDMA) and pulls the sum back - over TCP
  every byte a process sends or receives passes its one ZeroMQ I/O thread (`van_bytes_per_s`); each
  GPU copies its 1/g back (COPYH2D); all-gather. A server sums the n pushes of a key (n - 1 sums and one
  copy into its store, server/server.cc) and answers the pulls; its NIC carries n copies each way.

Keys go to servers as BytePS maps them (global.cc: djb2 of the key's decimal string, modulo the servers;
key = declared index << 16 | partition index); the worker queues are first-in first-out (worker-side
scheduling is off unless BYTEPS_SCHEDULING_CREDIT is set, scheduled_queue.cc, which the study never set).
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

from harness.grouping.cost import MB
from harness.sim.costs import hooked_ready
from harness.sim.des import Fifo, Sim
from harness.sim.interference import gpu_comm_facts
from harness.sim.model import Outcome

if TYPE_CHECKING:  # annotations only
    from harness.sim.costs import BytePSCosts
    from harness.sim.links import Cluster
    from harness.sim.model import ComputeModel

PARTITION_SHIFT = 16
"""A partition's key: the tensor's declared index shifted by 16 bits, plus the partition index (global.cc)."""


def djb2(text: str) -> int:
    """The string hash BytePS maps keys to servers with (BYTEPS_KEY_HASH_FN's default), 64-bit."""
    h = 5381
    for ch in text.encode():
        h = (h * 33 + ch) & 0xFFFFFFFFFFFFFFFF
    return h


def server_of(key: int, servers: int) -> int:
    return djb2(str(key)) % servers if servers else 0


def declared_order(names: tuple, n: int) -> list[int]:
    """Each tensor's declared index: the study's optimizer declares "Gradient." + name for the names in
    sorted order (byteps_distributed_optimizer.py); index order when the names are unknown."""
    if len(names) != n:
        return list(range(n))
    order = sorted(range(n), key=lambda i: "Gradient." + names[i])
    index = [0] * n
    for d, i in enumerate(order):
        index[i] = d
    return index


@functools.lru_cache(maxsize=64)
def _keys(grad_bytes: tuple, names: tuple, fused: bool, part: int, servers: int) -> tuple[tuple, tuple]:
    """((tensors, bytes, server) per partition, in push order within each tensor (BSP: the one fused tensor of
    every gradient, declared after them); the keys each server holds). Cached: a model's partitions and their
    djb2 placement are the same in every simulation of it at this partition size and server count, and a fit
    runs thousands."""
    n = len(grad_bytes)
    declared = declared_order(names, n)
    tensors = (
        [(tuple(range(n)), int(sum(grad_bytes)), n)]
        if fused
        else [((i,), grad_bytes[i], declared[i]) for i in range(n)]
    )
    out = []
    for members, nbytes, index in tensors:
        for p in range(max(1, -(-nbytes // part))):
            size = min(part, nbytes - p * part)
            out.append((members, size, server_of((index << PARTITION_SHIFT) + p, servers)))
    return tuple(out), tuple(sum(1 for k in out if k[2] == s) for s in range(servers))


class _BytePSRun:
    def __init__(self, c: ComputeModel, cluster: Cluster, part_bytes: int, fused: bool):
        self.sim = sim = Sim()
        self.c, self.cluster = c, cluster
        st = cluster.stack
        self.cost: BytePSCosts = st.byteps
        self.g, self.n = cluster.workers_per_node, cluster.nodes
        self.S = cluster.n_servers if self.n > 1 else 0
        self.fused = fused
        intra = cluster.intra
        self.intra_rate, self.intra_hop = self.cost.nccl_edge_bytes_per_s or intra.bytes_per_s, intra.message_s
        link = cluster.inter
        self.link_lat = link.message_s
        log = st.contended
        self.scale = st.comm_scale  # GPU-side work slowed by compute beside it
        self.nccl = Fifo(sim, "nccl", log=log)  # the root's NCCL stream
        # the node's host path, each direction: GPU stores and NIC writes go up, GPU loads and NIC reads down
        self.host_up = Fifo(sim, "host-up", self.cost.host_bytes_per_s)
        self.host_down = Fifo(sim, "host-down", self.cost.host_bytes_per_s)
        self.d2h, self.h2d = Fifo(sim, "d2h", log=log), Fifo(sim, "h2d", log=log)
        nic = self.cost.nic_bytes_per_s or link.bytes_per_s  # a node's NIC for its many worker-server streams
        self.up = Fifo(sim, "nic-up", nic)
        self.down = Fifo(sim, "nic-down", nic)
        # ps-lite's ZeroMQ van (TCP): one I/O thread per process carries all its bytes, both directions
        self.van = Fifo(sim, "worker-van", self.cost.van_bytes_per_s)
        self.s_van = [Fifo(sim, f"server{s}-van", self.cost.van_bytes_per_s) for s in range(self.S)]
        self.conn_up = [Fifo(sim, f"conn{s}-up", self.cost.stream_bytes_per_s) for s in range(self.S)]
        self.conn_down = [Fifo(sim, f"conn{s}-down", self.cost.stream_bytes_per_s) for s in range(self.S)]
        self.s_in = [Fifo(sim, f"server{s}-in", nic) for s in range(self.S)]
        self.s_out = [Fifo(sim, f"server{s}-out", nic) for s in range(self.S)]
        self.s_lock = [Fifo(sim, f"server{s}-recv") for s in range(self.S)]
        self.s_sum = [Fifo(sim, f"server{s}-sum", self.cost.sum_bytes_per_s) for s in range(self.S)]
        names = getattr(c, "param_names", ())
        self.keys, self.server_keys = _keys(tuple(c.grad_bytes), names, fused, part_bytes, self.S)
        self.marks: dict = {}
        self.ring_s: dict = {}  # partition bytes -> its in-node ring's time (`_nccl`)

    def _nccl(self, nbytes: int) -> float:
        """A reduce-scatter or all-gather of nbytes among the node's g GPUs (through host memory): done when
        its ring is, and when the node's host path has carried its g - 1 hops of nbytes / g per GPU."""
        g, now = self.g, self.sim.now
        ring_s = self.ring_s.get(nbytes)
        if ring_s is None:  # a run's partitions have a few sizes: each one's ring time once
            ring_s = self.cost.nccl_call_s + ((g - 1) * self.intra_hop + (g - 1) / g * nbytes / self.intra_rate) * (
                self.scale
            )
            self.ring_s[nbytes] = ring_s
        ring = self.nccl.reserve(ring_s)
        hops = (g - 1) * nbytes
        if not hops:
            return ring - now
        return max(ring, self.host_up.reserve_bytes(hops), self.host_down.reserve_bytes(hops)) - now

    def partition(self, size: int, server: int):
        sim, cost, g, n = self.sim, self.cost, self.g, self.n
        yield self._nccl(size) + cost.signal_s  # REDUCE
        if n > 1:
            # the node's host path (an empty partition reserves none of it)
            host_up, host_down = self.host_up, self.host_down
            copied = max(
                self.d2h.reserve(size / g / cost.copy_bytes_per_s * self.scale),
                host_up.reserve_bytes(size) if size else 0.0,
            )
            yield copied - sim.now + cost.signal_s  # COPYD2H
            pushed = max(
                self.up.reserve_bytes(size),
                self.conn_up[server].reserve_bytes(size),
                self.s_in[server].reserve_bytes(n * size),
                host_down.reserve_bytes(size) if size else 0.0,
                self.van.reserve_bytes(size),
                self.s_van[server].reserve_bytes(n * size),
            )
            yield pushed - sim.now + self.link_lat + 2 * cost.message_s  # PUSH and its ack
            recv = self.s_lock[server].reserve(n * cost.recv_s)
            summed = self.s_sum[server].reserve_bytes(n * size, max(0.0, recv - sim.now))
            yield summed - sim.now  # n - 1 sums, 1 copy
            pulled = max(
                self.s_out[server].reserve_bytes(n * size),
                self.down.reserve_bytes(size),
                self.conn_down[server].reserve_bytes(size),
                host_up.reserve_bytes(size) if size else 0.0,
                self.s_van[server].reserve_bytes(n * size),
                self.van.reserve_bytes(size),
            )
            yield pulled - sim.now + self.link_lat + 2 * cost.message_s  # PULL request, response
            copied = max(
                self.h2d.reserve(size / g / cost.copy_bytes_per_s * self.scale),
                host_down.reserve_bytes(size) if size else 0.0,
            )
            yield copied - sim.now + cost.signal_s  # COPYH2D
        yield self._nccl(size) + cost.signal_s  # BROADCAST

    def main(self):
        c, sim, marks = self.c, self.sim, self.marks
        from_ready = self._ready()
        marks["start"] = sim.now
        yield c.forward_s
        t_bwd = sim.now
        for at, size, server in from_ready:
            sim.at(max(0.0, t_bwd + at - sim.now), self._start, size, server)
        yield from_ready[-1][0] if from_ready else 0.0
        marks["wait"] = sim.now
        yield list(self.done_all)
        marks["opt"] = sim.now
        yield c.optimizer_s
        marks["end"] = sim.now

    def _start(self, size: int, server: int) -> None:
        self.done_all.append(self.sim.process(self.partition(size, server)))

    def _ready(self) -> list[tuple[float, int, int]]:
        """(seconds after the start of backward when the partition is posted, bytes, server), in posting
        order: a tensor's partitions once its hook has run (the fused tensor once the last gradient is
        copied into it)."""
        c = self.c
        ready, end = hooked_ready(c, self.cluster.stack, [self.fused] * len(c.numels))
        if self.fused:
            return [(end, size, server) for _, size, server in self.keys]
        return sorted(((ready[m[0]], size, server) for m, size, server in self.keys), key=lambda x: x[0])

    def run(self) -> Outcome:
        self.done_all: list = []
        self.sim.process(self.main())
        self.sim.run()
        m, c = self.marks, self.c
        plan = {
            "partitions": len(self.keys),
            "servers": self.S,
            "engine": "byteps",
            "server_keys": list(self.server_keys),
        }
        if self.nccl.log is not None:  # the GPU-side stages beside the backward
            plan.update(gpu_comm_facts([self.nccl, self.d2h, self.h2d], m["start"] + c.forward_s, m["wait"]))
        return Outcome(
            m["end"] - m["start"],
            c.forward_s,
            m["wait"] - m["start"] - c.forward_s,
            m["opt"] - m["wait"],
            c.optimizer_s,
            plan,
        )


def byteps(c: ComputeModel, cluster: Cluster, knobs: dict, fused: bool) -> Outcome:
    """One iteration of a BytePS job on `cluster` (its stack's `byteps` costs): the fused tensor (BSP-PS)
    or every tensor (WFBP-PS, and ByteScheduler-PS, whose server-side reordering of sums leaves the
    workers' first-in first-out pipeline as it is), in partitions of knobs["partition_mb"]."""
    part = int(knobs["partition_mb"] * MB)
    return _BytePSRun(c, cluster, part, fused).run()
