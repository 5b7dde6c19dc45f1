"""Network models: links (rate, latency) with cited presets and the all-reduce cost on a cluster of
nodes (pure; fitting them to a measured commbench table is harness.predict.commbench_fit).

All-reduce on N = nodes x workers_per_node ranks is linear in the message size m:
    t(m) = alpha + beta * m
- `ring` (default, what NCCL and gloo run on one communicator): one ring through every rank. Every
  step moves m/N bytes over every ring edge at once, so the slowest edge (the node NIC when the ring
  leaves a node, else the intra-node link) sets the pace:
      alpha = 2(N-1) * latency_slowest,   beta = 2(N-1)/N / bandwidth_slowest
  (Patarasuk & Yuan, "Bandwidth optimal all-reduce algorithms", JPDC 2009; nccl-tests' busbw
  convention uses the same 2(N-1)/N factor.)
- `hierarchical` (2-level, Horovod's HIERARCHICAL_ALLREDUCE): reduce-scatter inside each node over g
  ranks, all-reduce across the n nodes (the g per-node rings share the node's NIC, so the NIC carries
  2(n-1)/n * m in total), all-gather inside the node:
      alpha = 2(g-1) lat_intra + 2(n-1) lat_inter,
      beta  = 2(g-1)/g / bw_intra + 2(n-1)/n / bw_inter
- a shared host path (`Cluster.host`, GPUs that cannot talk peer to peer, e.g. GeForce behind one PCIe
  switch): NCCL stages every intra-node hop and every NIC transfer through host memory, so per ring
  step a node's host path carries g + 1 step-chunks each way (g on one node); its rate / (g + 1) joins
  the slowest-edge minimum.
- a link's `per_message_s` (the kernel TCP stack's host cost per message) adds to its latency on every
  ring step; RDMA has none.
Parameter servers are modelled by the simulator (harness.sim.ps) on the same links: each
server's NIC carries the pushes from all workers and the pulls to all workers for its share of the
keys; each worker node's NIC carries its workers' full gradients both ways.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from harness.core.errors import UserError
from harness.sim.costs import PLAIN, Stack


@dataclass(frozen=True)
class Link:
    name: str
    """Preset name, or where the numbers came from (e.g. a commbench file)."""
    rate_gbit_s: float
    """Achievable data rate per direction, Gbit/s (not the signalling rate)."""
    latency_s: float
    """One-way small-message latency through the software stack in use, seconds."""
    source: str = ""
    """Where the numbers come from."""
    burst_bytes: float = 0.0
    """Token-bucket shaping (Linux tbf, the emulated testbed): payload bytes saved up while the link
    idles, which then pass at `peak_gbit_s` instead of the rate. 0 = a plain link."""
    peak_gbit_s: float = math.inf
    """Rate of the bytes covered by the bucket (the unshaped path underneath), Gbit/s."""
    per_message_s: float = 0.0
    """Host CPU time per message through the transport's software stack (kernel TCP: system calls,
    copies, the interrupt), beside `latency_s`, which is then the network's own (NIC, switch, wire).
    0 where `latency_s` already includes the stack (the generic presets) or there is none (RDMA)."""

    @property
    def message_s(self) -> float:
        """One-way time of a small message: the network's latency plus the stack's cost per message."""
        return self.latency_s + self.per_message_s

    @property
    def bytes_per_s(self) -> float:
        return self.rate_gbit_s * 1e9 / 8.0

    @property
    def peak_bytes_per_s(self) -> float:
        return self.peak_gbit_s * 1e9 / 8.0

    def time_s(self, nbytes: float) -> float:
        return self.message_s + nbytes / self.bytes_per_s


# Presets. Rates are achievable payload rates per direction; latencies are one-way for small
# messages through the stack named. Where a number is a typical measurement rather than a
# specification, the source says so: replace them with your own `ddlbench commbench` table.
LINKS: dict[str, Link] = {
    l.name: l
    for l in [
        Link(
            "eth-10g",
            9.4,
            25e-6,
            "10GBASE line rate 10 Gb/s; TCP payload at MTU 1500 is 1460/1538 = 95% of it (~9.4 Gb/s, "
            "what tuned iperf reaches; untuned hosts often see ~7 Gb/s); kernel TCP one-way latency "
            "~20-30 us (typical netperf TCP_RR on 10 GbE)",
        ),
        Link(
            "eth-25g",
            23.5,
            20e-6,
            "25GBASE (IEEE 802.3by) 25 Gb/s; TCP payload ~94% (~23.5 Gb/s); kernel TCP one-way latency "
            "~15-25 us (typical)",
        ),
        Link(
            "ib-100g",
            97.0,
            1.5e-6,
            "InfiniBand EDR 4x: 4 x 25.78 Gbaud with 64b/66b coding = 100 Gb/s data rate; perftest "
            "ib_send_bw/ib_write_bw reach ~97 Gb/s with ConnectX-4; verbs latency ~0.6 us (Mellanox "
            "ConnectX-4 spec), ~1-2 us through a switch and NCCL's proxy (typical)",
        ),
        Link(
            "ipoib-100g",
            25.0,
            12e-6,
            "TCP over the same EDR fabric (IP over InfiniBand, connected mode, MTU 65520): the kernel "
            "TCP stack and one core per stream limit it to roughly 20-40 Gb/s per stream, far below RDMA; "
            "one-way latency ~10-15 us (typical measurements; the study saw IPoIB well below IB RDMA)",
        ),
        Link(
            "pcie3-x16",
            96.0,
            2e-6,
            "PCI Express 3.0 x16: 8 GT/s x 16 lanes x 128b/130b = 15.75 GB/s per direction; GPU "
            "copies reach ~12 GB/s (~96 Gb/s) (CUDA bandwidthTest, typical); ~1-2 us DMA latency",
        ),
        Link(
            "nvlink2",
            1200.0,
            1e-6,
            "NVLink 2.0 (V100 SXM2): 6 links x 25 GB/s per direction = 150 GB/s = 1200 Gb/s per GPU "
            "(NVIDIA V100 datasheet); ~1 us (typical)",
        ),
    ]
}


def get_link(name: str) -> Link:
    if name not in LINKS:
        raise UserError(
            f"unknown network preset {name!r}: known presets are {', '.join(sorted(LINKS))} "
            f"(or give --commbench FILE.parquet with measured all-reduce times)"
        )
    return LINKS[name]


@dataclass(frozen=True)
class AlphaBeta:
    alpha_s: float
    """Start-up time of one collective, seconds."""
    beta_s_per_byte: float
    """Time per byte, seconds."""
    burst_bytes: float = 0.0
    """Message bytes a shaped link's token bucket lets through at `beta_peak_s_per_byte` after idling
    (the link bucket divided by the bytes each link carries per message byte); 0 = none."""
    beta_peak_s_per_byte: float = 0.0
    """Time per message byte while the bucket lasts."""
    planning: AlphaBeta | None = None
    """What mgwfbp's start-up probe would fit here (a least-squares line over 4 KB..16 MB), when that
    differs from the cost itself (a shaped link: the bucket pulls the fitted alpha to ~0); the
    simulated mgwfbp plans with it, as the real scheme does. None = this alpha/beta."""
    small: AlphaBeta | None = None
    """A second algorithm the library picks where it is faster (NCCL's tree for small messages across
    nodes, Sanders et al. "Two-tree algorithms for full bandwidth broadcast, reduction and scan", 2009):
    a message costs the cheaper of the two lines. None = this line only."""
    parts: tuple[AlphaBeta, AlphaBeta] | None = None
    """(the node's own path, the wire between nodes) where a ring across nodes runs step by step at the slower
    of the two: this line's alpha and beta are the larger of the parts'. A GPU shared with compute slows the
    node's path (its hops through host memory, the kernels), not the wire (harness/sim/interference.py).
    None = one path."""

    def time_s(self, nbytes: float) -> float:
        t = self.alpha_s + self.beta_s_per_byte * nbytes
        return min(t, self.small.time_s(nbytes)) if self.small is not None else t


ZERO = AlphaBeta(0.0, 0.0)


def _scaled(ab: AlphaBeta, f: float) -> AlphaBeta:
    """`ab` on a GPU whose communication runs f times slower beside compute: every time of the line (its
    small-message line too) times f, or where the line has parts, the node's path times f and the wire as it
    was, the line again the slower of the two. What a planner fits is left as it was."""
    small = _scaled(ab.small, f) if ab.small is not None else None
    if ab.parts is None:
        return replace(ab, alpha_s=ab.alpha_s * f, beta_s_per_byte=ab.beta_s_per_byte * f, small=small)
    node, wire = _scaled(ab.parts[0], f), ab.parts[1]
    return replace(
        ab,
        alpha_s=max(node.alpha_s, wire.alpha_s),
        small=small,
        parts=(node, wire),
        beta_s_per_byte=max(node.beta_s_per_byte, wire.beta_s_per_byte),
    )


def slower_of(node: AlphaBeta, wire: AlphaBeta, **kw) -> AlphaBeta:
    """A ring across nodes that runs step by step at the slower of the node's own path and the wire."""
    return AlphaBeta(
        max(node.alpha_s, wire.alpha_s), max(node.beta_s_per_byte, wire.beta_s_per_byte), parts=(node, wire), **kw
    )


@dataclass(frozen=True)
class Cluster:
    nodes: int
    """Hosts."""
    workers_per_node: int
    """Workers (GPUs) per host."""
    inter: Link
    """Link between hosts: each host's NIC (also the PS servers' NICs)."""
    intra: Link
    """Link between workers inside a host."""
    servers: int = 0
    """Parameter servers (0 = one per worker node)."""
    server_hosts: str = "dedicated"
    """dedicated: each server on a host of its own with the `inter` NIC (the study's layout);
    colocated: server s on worker host s mod nodes, sharing its NIC (a testbed with no spare host)."""
    allreduce: str = "ring"
    """ring | hierarchical (see the module docstring)."""
    host: Link | None = None
    """The host path every GPU's and the NIC's traffic shares when the GPUs cannot talk peer to peer
    (e.g. GeForce cards behind one PCIe switch: NCCL stages each intra-node hop through host memory,
    and without GPUDirect RDMA the NIC reads and writes host memory too). None = GPUs reach each
    other and the NIC directly (`intra` alone bounds intra-node traffic)."""
    measured: dict | None = None
    """workers -> AlphaBeta measured for all-reduce (commbench); used as is at those worker counts."""
    stack: Stack = PLAIN
    """What the software running the schedule costs beyond the links (harness/sim/costs.py): nothing for
    ddlbench's own schemes; the study's frameworks set theirs."""

    @property
    def workers(self) -> int:
        return self.nodes * self.workers_per_node

    @property
    def n_servers(self) -> int:
        return self.servers or self.nodes

    def allreduce_cost(self) -> AlphaBeta:
        """alpha/beta of one all-reduce; on a token-bucket shaped `inter` link (n > 1 nodes), with the
        bucket in message bytes: a ring moves 2(N-1)/N bytes over every link per message byte."""
        ab = self._allreduce_cost()
        if self.stack.comm_scale != 1.0:  # slowed by the compute beside it (harness/sim/interference.py)
            ab = _scaled(ab, self.stack.comm_scale)
        if self.nodes > 1 and self.inter.burst_bytes and ab.beta_s_per_byte:
            per_byte = 2 * (self.workers - 1) / self.workers
            ab = replace(
                ab,
                burst_bytes=self.inter.burst_bytes / per_byte,
                beta_peak_s_per_byte=per_byte / self.inter.peak_bytes_per_s,
            )
        return ab

    def _allreduce_cost(self) -> AlphaBeta:
        n, g, N = self.nodes, self.workers_per_node, self.workers
        if N <= 1:
            return ZERO
        if self.measured and N in self.measured:
            return self.measured[N]
        if n == 1:
            lat, bw = self.intra.message_s, min(self.intra.bytes_per_s, self._host_bytes_per_s(g, 1))
            return AlphaBeta(2 * (N - 1) * lat, 2 * (N - 1) / N / bw)
        if self.allreduce == "hierarchical":
            a = 2 * (g - 1) * self.intra.message_s + 2 * (n - 1) * self.inter.message_s
            b = (2 * (g - 1) / g / self.intra.bytes_per_s if g > 1 else 0.0) + 2 * (n - 1) / n / self.inter.bytes_per_s
            return AlphaBeta(a, b)
        if self.allreduce != "ring":
            raise UserError(f"unknown all-reduce model {self.allreduce!r}: use ring or hierarchical")
        lat = max(self.inter.message_s, self.intra.message_s if g > 1 else 0.0)
        bw = min(self.inter.bytes_per_s, self.intra.bytes_per_s if g > 1 else math.inf, self._host_bytes_per_s(g, n))
        return AlphaBeta(2 * (N - 1) * lat, 2 * (N - 1) / N / bw)

    def _host_bytes_per_s(self, g: int, n: int) -> float:
        """The ring's rate as the shared host path allows it. Every ring step, each of a node's g - 1
        intra-node hops crosses the host path twice (the sender's copy into host memory, the
        receiver's copy out of it), and, across nodes, the bytes leaving and entering through the NIC
        too (GPU to host memory, NIC DMA; and back): per direction (g - 1) + 2 = g + 1 step-chunks
        on n > 1 nodes, g on one node (the ring closes inside it)."""
        if self.host is None:
            return math.inf
        return self.host.bytes_per_s / (g + 1 if n > 1 else g)

    def with_(self, **kw) -> Cluster:
        return replace(self, **kw)
