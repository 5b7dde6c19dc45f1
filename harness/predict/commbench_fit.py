"""Network models fitted to a measured `ddlbench commbench` table: alpha/beta per collective and
worker count, links inverted from them, the token-bucket aware fit of the emulated testbed, and the
parameter-server link inverted from push-pull times through the simulator."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import pandas as pd

from harness.core.errors import UserError
from harness.grouping.cost import ALPHA_BETA_PROBE_SIZES, fit_alpha_beta
from harness.measure.sizes import PART, parse_size
from harness.sim.links import AlphaBeta, Cluster, Link
from harness.sim.ps import ps_link_from_pushpull
from harness.testbed.state import TBF_BURST

ALLREDUCE_NAMES = {"allreduce", "all_reduce", "all-reduce"}
P2P_NAMES = {"sendrecv", "send_recv", "p2p", "send-recv"}


def fit_commbench(df: pd.DataFrame) -> dict[str, dict[int, AlphaBeta]]:
    """Least-squares alpha/beta per (collective, workers) from a commbench table (columns collective,
    workers, size_bytes, time_s; repetitions reduced to their median first). Collective names are
    normalised to `allreduce` and `p2p`."""
    need = {"collective", "workers", "size_bytes", "time_s"}
    missing = need - set(df.columns)
    if missing:
        raise UserError(
            f"commbench table lacks column(s) {', '.join(sorted(missing))}: it needs "
            f"collective, workers, size_bytes, time_s (as `ddlbench commbench` writes)"
        )
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
        raise UserError(
            "commbench table has no all-reduce rows with >= 2 message sizes: run "
            "`ddlbench commbench` with several sizes"
        )
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
    frames = []
    for p in [paths] if isinstance(paths, (str, Path)) else list(paths):
        f = Path(p) / "commbench.parquet" if Path(p).is_dir() else Path(p)
        if not f.exists():
            raise UserError(
                f"commbench table {f} does not exist: run `ddlbench commbench --output DIR` (or give --link PRESET)"
            )
        frames.append(pd.read_parquet(f))
    return pd.concat(frames, ignore_index=True)


SMALL_MESSAGE_BYTES = 64 * 1024
"""Messages up to this size are start-up dominated: their mean time is a shaped link's alpha."""


def testbed_burst_bytes() -> float:
    """Payload bytes of `ddlbench testbed`'s tbf bucket: tc's `1mb` is 1 MiB of frame bytes, and a full
    TCP segment carries 1448 payload bytes in a 1514-byte frame (the same share of the rate: the
    measured busbw/rate of ~0.955)."""
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
            raise UserError(
                f"commbench rows at {n} workers do not span the token bucket ({burst_bytes:.0f} "
                f"bytes): measure sizes from 4K to at least {_size_text(8 * burst_bytes)} "
                f"(`ddlbench commbench --testbed --min-size 4K --max-size 32M`)"
            )
        _, beta = fit_alpha_beta(large.index.astype(float).tolist(), large.astype(float).tolist())
        alpha = float(small["time_s"].mean())
        probe = g[g["size_bytes"].isin(ALPHA_BETA_PROBE_SIZES)].groupby("size_bytes")["time_s"].median()
        planning = (
            AlphaBeta(*fit_alpha_beta(probe.index.astype(float).tolist(), probe.astype(float).tolist()))
            if len(probe) >= 2
            else None
        )
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


def links_from_commbench(
    source, burst_bytes: float = 0.0, ps_layout: Cluster | None = None, server_gbyte_s: float = 10.0
) -> tuple[Link, Link | None, dict[int, AlphaBeta]]:
    """(all-reduce link, point-to-point link or None, measured all-reduce fits by worker count) from a
    commbench table or the files/run directories holding one (`read_commbench`).
    The all-reduce link is inverted at the largest measured worker count; the fits themselves are
    used as they are at the worker counts they were measured at. Point-to-point rows (e.g. from
    `ddlbench commbench --collective p2p`) give the parameter-server link directly; push-pull rows only with
    `ps_layout`, because their time mixes both NIC directions, the server's summation and partition
    pipelining, which the simulator has to replay on the layout they were measured on.

    burst_bytes > 0: the network is shaped by token buckets of that size (`ddlbench testbed`'s tbf;
    give the payload bytes): fitted by `fit_shaped`, and the link carries the bucket so that the
    simulator lets each idle link send that much at the peak rate.

    ps_layout: where workers and servers sit when the push-pull rows were measured (a Cluster; its
    links are ignored): push-pull rows at its worker count then give the parameter-server link, by
    inverting the simulator (ps_sim.ps_link_from_pushpull)."""
    df = source if isinstance(source, pd.DataFrame) else read_commbench(source)
    if burst_bytes:
        shaped = fit_shaped(df, burst_bytes)
        w = max(shaped)
        fit, peak = shaped[w]
        link = link_from_allreduce(fit, w, "commbench")
        link = replace(
            link,
            burst_bytes=burst_bytes,
            peak_gbit_s=max(peak, link.rate_gbit_s),
            source=f"fitted from shaped all-reduce times at {w} workers (alpha: mean of small "
            f"messages; beta: sizes past the {burst_bytes:.0f}-byte bucket)",
        )
        return link, _ps_link(df, ps_layout, server_gbyte_s, link), {n: ab for n, (ab, _) in shaped.items()}
    fits = fit_commbench(df)
    ar = fits["allreduce"]
    w = max(ar)
    link = link_from_allreduce(ar[w], w, "commbench")
    p2p = fits.get("p2p")
    p2p_link = link_from_p2p(p2p[max(p2p)], "commbench-p2p") if p2p else _ps_link(df, ps_layout, server_gbyte_s, link)
    return link, p2p_link, ar


def _ps_link(df: pd.DataFrame, layout: Cluster | None, server_gbyte_s: float, link: Link) -> Link | None:
    """The parameter-server link fitted to the push-pull rows at the layout's worker count (None
    without a layout or such rows). Carries `link`'s token bucket."""
    if layout is None:
        return None
    pp = df[(df["collective"] == "pushpull") & (df["workers"] == layout.workers)]
    small = pp[pp["size_bytes"] <= SMALL_MESSAGE_BYTES]
    if pp.empty or small.empty:
        return None
    times = pp.groupby("size_bytes")["time_s"].median().to_dict()
    try:
        return ps_link_from_pushpull(
            times, float(small["time_s"].mean()), layout, PART, server_gbyte_s, link.burst_bytes, link.peak_gbit_s
        )
    except ValueError as e:
        raise UserError(
            f"cannot fit the parameter-server link to the push-pull rows: {e}; measure "
            f"`ddlbench commbench --collective pushpull` up to 32M"
        ) from None
