"""Network models: links (rate, latency) with cited presets, all-reduce cost on a cluster of nodes,
and the alpha-beta fit from a commbench table.

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
Parameter servers are modelled by the simulator (harness.predict.methods) on the same links: each
server's NIC carries the pushes from all workers and the pulls to all workers for its share of the
keys; each worker node's NIC carries its workers' full gradients both ways.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import pandas as pd

from harness.errors import UserError
from harness.planning import ALPHA_BETA_PROBE_SIZES, fit_alpha_beta


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

    @property
    def bytes_per_s(self) -> float:
        return self.rate_gbit_s * 1e9 / 8.0

    @property
    def peak_bytes_per_s(self) -> float:
        return self.peak_gbit_s * 1e9 / 8.0

    def time_s(self, nbytes: float) -> float:
        return self.latency_s + nbytes / self.bytes_per_s


# Presets. Rates are achievable payload rates per direction; latencies are one-way for small
# messages through the stack named. Where a number is a typical measurement rather than a
# specification, the source says so: replace them with your own `ddlbench commbench` table.
LINKS: dict[str, Link] = {l.name: l for l in [
    Link("eth-10g", 9.4, 25e-6,
         "10GBASE line rate 10 Gb/s; TCP payload at MTU 1500 is 1460/1538 = 95% of it (~9.4 Gb/s, "
         "what tuned iperf reaches; untuned hosts often see ~7 Gb/s); kernel TCP one-way latency "
         "~20-30 us (typical netperf TCP_RR on 10 GbE)"),
    Link("eth-25g", 23.5, 20e-6,
         "25GBASE (IEEE 802.3by) 25 Gb/s; TCP payload ~94% (~23.5 Gb/s); kernel TCP one-way latency "
         "~15-25 us (typical)"),
    Link("ib-100g", 97.0, 1.5e-6,
         "InfiniBand EDR 4x: 4 x 25.78 Gbaud with 64b/66b coding = 100 Gb/s data rate; perftest "
         "ib_send_bw/ib_write_bw reach ~97 Gb/s with ConnectX-4; verbs latency ~0.6 us (Mellanox "
         "ConnectX-4 spec), ~1-2 us through a switch and NCCL's proxy (typical)"),
    Link("ipoib-100g", 25.0, 12e-6,
         "TCP over the same EDR fabric (IP over InfiniBand, connected mode, MTU 65520): the kernel "
         "TCP stack and one core per stream limit it to roughly 20-40 Gb/s per stream, far below RDMA; "
         "one-way latency ~10-15 us (typical measurements; the study saw IPoIB well below IB RDMA)"),
    Link("pcie3-x16", 96.0, 2e-6,
         "PCI Express 3.0 x16: 8 GT/s x 16 lanes x 128b/130b = 15.75 GB/s per direction; GPU "
         "copies reach ~12 GB/s (~96 Gb/s) (CUDA bandwidthTest, typical); ~1-2 us DMA latency"),
    Link("nvlink2", 1200.0, 1e-6,
         "NVLink 2.0 (V100 SXM2): 6 links x 25 GB/s per direction = 150 GB/s = 1200 Gb/s per GPU "
         "(NVIDIA V100 datasheet); ~1 us (typical)"),
]}


def get_link(name: str) -> Link:
    if name not in LINKS:
        raise UserError(f"unknown network preset {name!r}: known presets are {', '.join(sorted(LINKS))} "
                        f"(or give --commbench FILE.parquet with measured all-reduce times)")
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
    planning: "AlphaBeta | None" = None
    """What mgwfbp's start-up probe would fit here (a least-squares line over 4 KB..16 MB), when that
    differs from the cost itself (a shaped link: the bucket pulls the fitted alpha to ~0); the
    simulated mgwfbp plans with it, as the real scheme does. None = this alpha/beta."""

    def time_s(self, nbytes: float) -> float:
        return self.alpha_s + self.beta_s_per_byte * nbytes


ZERO = AlphaBeta(0.0, 0.0)


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
    measured: dict | None = None
    """workers -> AlphaBeta measured for all-reduce (commbench); used as is at those worker counts."""

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
        if self.nodes > 1 and self.inter.burst_bytes and ab.beta_s_per_byte:
            per_byte = 2 * (self.workers - 1) / self.workers
            ab = replace(ab, burst_bytes=self.inter.burst_bytes / per_byte,
                         beta_peak_s_per_byte=per_byte / self.inter.peak_bytes_per_s)
        return ab

    def _allreduce_cost(self) -> AlphaBeta:
        n, g, N = self.nodes, self.workers_per_node, self.workers
        if N <= 1:
            return ZERO
        if self.measured and N in self.measured:
            return self.measured[N]
        if n == 1:
            lat, bw = self.intra.latency_s, self.intra.bytes_per_s
            return AlphaBeta(2 * (N - 1) * lat, 2 * (N - 1) / N / bw)
        if self.allreduce == "hierarchical":
            a = 2 * (g - 1) * self.intra.latency_s + 2 * (n - 1) * self.inter.latency_s
            b = (2 * (g - 1) / g / self.intra.bytes_per_s if g > 1 else 0.0) \
                + 2 * (n - 1) / n / self.inter.bytes_per_s
            return AlphaBeta(a, b)
        if self.allreduce != "ring":
            raise UserError(f"unknown all-reduce model {self.allreduce!r}: use ring or hierarchical")
        lat = max(self.inter.latency_s, self.intra.latency_s if g > 1 else 0.0)
        bw = min(self.inter.bytes_per_s, self.intra.bytes_per_s if g > 1 else math.inf)
        return AlphaBeta(2 * (N - 1) * lat, 2 * (N - 1) / N / bw)

    def with_(self, **kw) -> "Cluster":
        return replace(self, **kw)


# --- commbench --------------------------------------------------------------------------------------

ALLREDUCE_NAMES = {"allreduce", "all_reduce", "all-reduce"}
P2P_NAMES = {"sendrecv", "send_recv", "p2p", "send-recv"}


def fit_commbench(df: pd.DataFrame) -> dict[str, dict[int, AlphaBeta]]:
    """Least-squares alpha/beta per (collective, workers) from a commbench table (columns collective,
    workers, size_bytes, time_s; repetitions reduced to their median first). Collective names are
    normalised to `allreduce` and `p2p`."""
    need = {"collective", "workers", "size_bytes", "time_s"}
    missing = need - set(df.columns)
    if missing:
        raise UserError(f"commbench table lacks column(s) {', '.join(sorted(missing))}: it needs "
                        f"collective, workers, size_bytes, time_s (as `ddlbench commbench` writes)")
    out: dict[str, dict[int, AlphaBeta]] = {}
    med = df.groupby(["collective", "workers", "size_bytes"], as_index=False)["time_s"].median()
    for (coll, workers), g in med.groupby(["collective", "workers"]):
        name = str(coll).lower()
        kind = "allreduce" if name in ALLREDUCE_NAMES else "p2p" if name in P2P_NAMES else name
        if len(g) < 2:
            continue
        a, b = fit_alpha_beta(g["size_bytes"].astype(float).tolist(), g["time_s"].astype(float).tolist())
        out.setdefault(kind, {})[int(workers)] = AlphaBeta(a, b)
    if "allreduce" not in out:
        raise UserError("commbench table has no all-reduce rows with >= 2 message sizes: run "
                        "`ddlbench commbench` with several sizes")
    return out


def link_from_allreduce(fit: AlphaBeta, workers: int, name: str) -> Link:
    """Invert the ring model at the measured worker count: latency = alpha / 2(N-1),
    bandwidth = 2(N-1)/N / beta."""
    n = max(2, workers)
    lat = fit.alpha_s / (2 * (n - 1))
    bw = (2 * (n - 1) / n) / fit.beta_s_per_byte if fit.beta_s_per_byte > 0 else 1e12
    return Link(name, bw * 8 / 1e9, lat, f"fitted from all-reduce times at {n} workers")


def link_from_p2p(fit: AlphaBeta, name: str) -> Link:
    bw = 1.0 / fit.beta_s_per_byte if fit.beta_s_per_byte > 0 else 1e12
    return Link(name, bw * 8 / 1e9, fit.alpha_s, "fitted from point-to-point send/recv times")


def read_commbench(paths) -> pd.DataFrame:
    """Commbench rows from Parquet files or run directories (their commbench.parquet), concatenated."""
    from pathlib import Path

    frames = []
    for p in ([paths] if isinstance(paths, (str, Path)) else list(paths)):
        f = Path(p) / "commbench.parquet" if Path(p).is_dir() else Path(p)
        if not f.exists():
            raise UserError(f"commbench table {f} does not exist: run `ddlbench commbench --output DIR` "
                            f"(or give --network PRESET)")
        frames.append(pd.read_parquet(f))
    return pd.concat(frames, ignore_index=True)


SMALL_MESSAGE_BYTES = 64 * 1024
"""Messages up to this size are start-up dominated: their mean time is a shaped link's alpha."""


def testbed_burst_bytes() -> float:
    """Payload bytes of `ddlbench testbed`'s tbf bucket: tc's `1mb` is 1 MiB of frame bytes, and a full
    TCP segment carries 1448 payload bytes in a 1514-byte frame (the same share of the rate: the
    measured busbw/rate of ~0.955)."""
    from harness.commbench import parse_size
    from harness.testbed.state import TBF_BURST

    return parse_size(TBF_BURST) * 1448 / 1514


def fit_shaped(df: pd.DataFrame, burst_bytes: float) -> dict[int, tuple[AlphaBeta, float]]:
    """All-reduce alpha/beta on a token-bucket shaped network (the emulated testbed's tbf), by worker
    count, with the peak rate seen inside the bucket: workers -> (AlphaBeta, peak Gbit/s per link).

    A plain least-squares line is wrong there: messages that fit in the bucket pass at the unshaped
    speed, so small sizes pull alpha to zero. Instead
    - beta: least squares over sizes >= 4 x the bucket (the bucket drained, the link at its rate);
    - alpha: the *mean* time of messages <= 64 KiB (all inside the bucket). The mean, not the median:
      shaped small messages now and then wait for the shaper's next timer tick (a few ms at HZ=250),
      and an iteration of many small all-reduces pays the mean;
    - peak: per link, 2(N-1)/N x size over the time the largest size <= a quarter of the bucket takes
      beyond the smallest size (fastest repetitions of each: the unshaped speed, start-up removed)."""
    out: dict[int, tuple[AlphaBeta, float]] = {}
    ar = df[df["collective"].astype(str).str.lower().isin(ALLREDUCE_NAMES)]
    for workers, g in ar.groupby("workers"):
        n = int(workers)
        large = g[g["size_bytes"] >= 4 * burst_bytes].groupby("size_bytes")["time_s"].median()
        small = g[g["size_bytes"] <= SMALL_MESSAGE_BYTES]
        if len(large) < 2 or small.empty:
            raise UserError(f"commbench rows at {n} workers do not span the token bucket ({burst_bytes:.0f} "
                            f"bytes): measure sizes from 4K to at least {_size_text(8 * burst_bytes)} "
                            f"(`ddlbench commbench --testbed --min-size 4K --max-size 32M`)")
        _, beta = fit_alpha_beta(large.index.astype(float).tolist(), large.astype(float).tolist())
        alpha = float(small["time_s"].mean())
        probe = g[g["size_bytes"].isin(ALPHA_BETA_PROBE_SIZES)].groupby("size_bytes")["time_s"].median()
        planning = AlphaBeta(*fit_alpha_beta(probe.index.astype(float).tolist(), probe.astype(float).tolist())) \
            if len(probe) >= 2 else None
        inside = g[g["size_bytes"] <= burst_bytes / 4].groupby("size_bytes")["time_s"].min()
        per_byte = 2 * (n - 1) / n if n > 1 else 1.0
        extra_s = float(inside.iloc[-1] - inside.iloc[0]) if len(inside) > 1 else 0.0
        peak = (per_byte * float(inside.index[-1] - inside.index[0]) * 8 / extra_s / 1e9) if extra_s > 0 else math.inf
        out[n] = (AlphaBeta(alpha, beta, planning=planning), peak)
    if not out:
        raise UserError("commbench table has no all-reduce rows: run `ddlbench commbench --testbed`")
    return out


def _size_text(nbytes: float) -> str:
    return f"{nbytes / 2**20:.0f}M"


def links_from_commbench(source, burst_bytes: float = 0.0, ps_layout: "Cluster | None" = None,
                         server_gbyte_s: float = 10.0) -> tuple[Link, Link | None, dict[int, AlphaBeta]]:
    """(all-reduce link, point-to-point link or None, measured all-reduce fits by worker count) from a
    commbench table or the files/run directories holding one (`read_commbench`).
    The all-reduce link is inverted at the largest measured worker count; the fits themselves are
    used as they are at the worker counts they were measured at. Point-to-point rows (e.g. from
    harness.predict.loopback_probe) give the parameter-server link directly; push-pull rows only with
    `ps_layout`, because their time mixes both NIC directions, the server's summation and partition
    pipelining, which the simulator has to replay on the layout they were measured on.

    burst_bytes > 0: the network is shaped by token buckets of that size (`ddlbench testbed`'s tbf;
    give the payload bytes): fitted by `fit_shaped`, and the link carries the bucket so that the
    simulator lets each idle link send that much at the peak rate.

    ps_layout: where workers and servers sit when the push-pull rows were measured (a Cluster; its
    links are ignored): push-pull rows at its worker count then give the parameter-server link, by
    inverting the simulator (methods.ps_link_from_pushpull)."""
    df = source if isinstance(source, pd.DataFrame) else read_commbench(source)
    if burst_bytes:
        shaped = fit_shaped(df, burst_bytes)
        w = max(shaped)
        fit, peak = shaped[w]
        link = link_from_allreduce(fit, w, "commbench")
        link = replace(link, burst_bytes=burst_bytes, peak_gbit_s=max(peak, link.rate_gbit_s),
                       source=f"fitted from shaped all-reduce times at {w} workers (alpha: mean of small "
                              f"messages; beta: sizes past the {burst_bytes:.0f}-byte bucket)")
        return link, _ps_link(df, ps_layout, server_gbyte_s, link), {n: ab for n, (ab, _) in shaped.items()}
    fits = fit_commbench(df)
    ar = fits["allreduce"]
    w = max(ar)
    link = link_from_allreduce(ar[w], w, "commbench")
    p2p = fits.get("p2p")
    p2p_link = link_from_p2p(p2p[max(p2p)], "commbench-p2p") if p2p else _ps_link(df, ps_layout, server_gbyte_s, link)
    return link, p2p_link, ar


def _ps_link(df: pd.DataFrame, layout: "Cluster | None", server_gbyte_s: float, link: Link) -> Link | None:
    """The parameter-server link fitted to the push-pull rows at the layout's worker count (None
    without a layout or such rows). Carries `link`'s token bucket."""
    if layout is None:
        return None
    from harness.commbench import PART
    from harness.predict.methods import ps_link_from_pushpull

    pp = df[(df["collective"] == "pushpull") & (df["workers"] == layout.workers)]
    small = pp[pp["size_bytes"] <= SMALL_MESSAGE_BYTES]
    if pp.empty or small.empty:
        return None
    times = pp.groupby("size_bytes")["time_s"].median().to_dict()
    try:
        return ps_link_from_pushpull(times, float(small["time_s"].mean()), layout, PART, server_gbyte_s,
                                     link.burst_bytes, link.peak_gbit_s)
    except ValueError as e:
        raise UserError(f"cannot fit the parameter-server link to the push-pull rows: {e}; measure "
                        f"`ddlbench commbench --collective pushpull` up to 32M") from None
