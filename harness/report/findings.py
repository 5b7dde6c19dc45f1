"""The study's two findings, computed from a run's own numbers (pure: DataFrames in, text and figures out).

    blocks = findings(summary)   # [("p", text) | ("fig", Figure, file, caption)], render.py lays them out

Finding 1 (low model intensity scales poorly): per network and worker count, the best scaling efficiency
any method reaches on each workload; it holds where the workload with the lowest intensity (FLOPs per
byte communicated per worker) gets a lower best efficiency than the one with the highest.
Finding 2 (architecture and scheduling change which method wins, most on slow networks): per workload
and worker count, on each network, the winner, its architecture (all-reduce or parameter server) and the
spread best/worst throughput among the methods; it holds where the spread is larger on the slowest link
than on the fastest. Both statements say how many settings agree, so a run that contradicts the study
says so.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from harness.report.data import measured, ok, with_series
from harness.report.figures import _figure_legend, _series_order, plt, scheme_colors


def architecture(scheme: str) -> str:
    return "parameter server" if str(scheme).endswith("-ps") else "all-reduce"


def _cells(summary: pd.DataFrame) -> pd.DataFrame:
    s = ok(with_series(measured(summary)))
    if s.empty:
        return s
    s = s[(s["scheme"] != "local") & (s["workers"] > 1)]
    rate = s["network_rate_mbit"] if "network_rate_mbit" in s else pd.Series(np.nan, index=s.index)
    return s.assign(network=s["network"].fillna("unknown").astype(str), rate=rate.fillna(np.inf))


def intensities(summary: pd.DataFrame) -> dict[str, float]:
    """workload -> FLOPs of one worker's batch per byte it communicates (as the Workloads table)."""
    s = _cells(summary)
    out = {}
    for wl, d in s.groupby("workload"):
        comm = d["comm_bytes_per_iter"].max() if "comm_bytes_per_iter" in d else np.nan
        r = d.iloc[0]
        f = r.get("flops_per_sample", np.nan) * r.get("batch_per_worker", np.nan)
        out[wl] = float(f / comm) if comm and np.isfinite(comm) and comm > 0 else np.nan
    return out


def best_efficiency(summary: pd.DataFrame) -> pd.DataFrame:
    """Per (network, workers, workload): the best scaling efficiency and the method reaching it."""
    s = _cells(summary).dropna(subset=["scaling_efficiency"]) if not _cells(summary).empty else _cells(summary)
    if s.empty:
        return pd.DataFrame(columns=["network", "rate", "workers", "workload", "series", "efficiency"])
    idx = s.groupby(["network", "workers", "workload"])["scaling_efficiency"].idxmax()
    b = s.loc[idx, ["network", "rate", "workers", "workload", "series", "scaling_efficiency"]]
    return b.rename(columns={"scaling_efficiency": "efficiency"}).sort_values(["rate", "workers", "workload"])


def finding_intensity(summary: pd.DataFrame) -> tuple[str, pd.DataFrame]:
    b, inten = best_efficiency(summary), intensities(summary)
    known = {w: i for w, i in inten.items() if np.isfinite(i)}
    if b.empty or len(known) < 2:
        return (
            "Finding 1 (low model intensity scales poorly even with the best method) needs multi-worker "
            "cells of at least two workloads with recorded FLOPs and bytes: not in these runs.",
            b,
        )
    low, high = min(known, key=known.get), max(known, key=known.get)
    parts, agree, total = [], 0, 0
    for (net, n), d in b.groupby(["network", "workers"], sort=False):
        e = d.set_index("workload")
        if low not in e.index or high not in e.index:
            continue
        total += 1
        agree += bool(e.loc[low, "efficiency"] < e.loc[high, "efficiency"])
        parts.append(
            f"{net}, N={int(n)}: {low} {e.loc[low, 'efficiency']:.2f} ({e.loc[low, 'series']}) vs "
            f"{high} {e.loc[high, 'efficiency']:.2f} ({e.loc[high, 'series']})"
        )
    verdict = "holds" if total and agree == total else "holds in part" if agree else "does not hold"
    text = (
        f"Finding 1, low model intensity scales poorly even with the best method: {verdict} here "
        f"({agree} of {total} settings). {low} communicates the most per FLOP ({known[low]:.0f} FLOP/byte "
        f"per worker) and {high} the least ({known[high]:.0f} FLOP/byte); the best scaling efficiency any "
        f"method reaches (method in brackets): " + "; ".join(parts) + "."
    )
    return text, b


def spreads(summary: pd.DataFrame) -> pd.DataFrame:
    """Per (workload, workers, network): winner, its architecture, best and worst X, best X per architecture."""
    s = _cells(summary)
    rows = []
    for (wl, n, net), d in s.groupby(["workload", "workers", "network"]):
        d = d.sort_values("throughput_median", ascending=False)
        best, worst = d.iloc[0], d.iloc[-1]
        arch = d.assign(a=d["scheme"].map(architecture)).groupby("a")["throughput_median"].max()
        rows.append(
            {
                "workload": wl,
                "workers": int(n),
                "network": net,
                "rate": float(d["rate"].iloc[0]),
                "winner": best["series"],
                "winner_arch": architecture(best["scheme"]),
                "best_x": best["throughput_median"],
                "worst": worst["series"],
                "worst_x": worst["throughput_median"],
                "spread": best["throughput_median"] / worst["throughput_median"],
                "methods": len(d),
                "allreduce_x": arch.get("all-reduce", np.nan),
                "ps_x": arch.get("parameter server", np.nan),
            }
        )
    return pd.DataFrame(rows)


def finding_architecture(summary: pd.DataFrame) -> tuple[str, pd.DataFrame]:
    sp = spreads(summary)
    nets = sp.groupby("network")["rate"].first().sort_values() if len(sp) else pd.Series(dtype=float)
    if len(nets) < 2:
        return (
            "Finding 2 (architecture and scheduling change the winner, most on slow networks) needs the "
            "same cells on at least two networks: not in these runs.",
            sp,
        )
    slow, fast = nets.index[0], nets.index[-1]
    parts, agree, total, flips = [], 0, 0, 0
    for (wl, n), d in sp.groupby(["workload", "workers"]):
        e = d.set_index("network")
        if slow not in e.index or fast not in e.index:
            continue
        total += 1
        agree += bool(e.loc[slow, "spread"] > e.loc[fast, "spread"])
        flips += e.loc[slow, "winner"] != e.loc[fast, "winner"]
        parts.append(
            f"{wl} N={int(n)}: on {slow} {e.loc[slow, 'winner']} wins ({e.loc[slow, 'winner_arch']}), "
            f"{e.loc[slow, 'spread']:.2f}x the slowest ({e.loc[slow, 'worst']}); on {fast} "
            f"{e.loc[fast, 'winner']} wins ({e.loc[fast, 'winner_arch']}), {e.loc[fast, 'spread']:.2f}x"
        )
    verdict = "holds" if total and agree == total else "holds in part" if agree else "does not hold"
    text = (
        f"Finding 2, the architecture (all-reduce or parameter server) and the schedule change which "
        f"method wins, most on the slower network: {verdict} here (the spread between the fastest and "
        f"the slowest method is larger on {slow} than on {fast} in {agree} of {total} settings; the "
        f"winner changes with the link in {flips} of {total}). " + "; ".join(parts) + "."
    )
    return text, sp


def intensity_figure(b: pd.DataFrame, inten: dict) -> plt.Figure:
    """Best scaling efficiency per workload (ordered by intensity), one bar per network and N."""
    wls = sorted(b["workload"].unique(), key=lambda w: inten.get(w, np.inf))
    groups = list(dict.fromkeys(f"{net} N={int(n)}" for net, n in zip(b["network"], b["workers"])))
    fig, ax = plt.subplots(figsize=(max(5.5, 1.6 * len(wls) * max(1, len(groups)) / 2), 3.6), layout="constrained")
    width = 0.8 / max(len(groups), 1)
    cmap = plt.get_cmap("Set2")
    for gi, g in enumerate(groups):
        d = b[[f"{net} N={int(n)}" == g for net, n in zip(b["network"], b["workers"])]].set_index("workload")
        xs = np.arange(len(wls)) - 0.4 + width * (gi + 0.5)
        ys = [d.loc[w, "efficiency"] if w in d.index else np.nan for w in wls]
        ax.bar(xs, np.nan_to_num(ys), width * 0.95, color=cmap(gi % cmap.N), label=g)
        for x, y, w in zip(xs, ys, wls):
            if np.isfinite(y):
                ax.text(x, y, f"{y:.2f}\n{d.loc[w, 'series']}", ha="center", va="bottom", fontsize=6)
    ax.axhline(1.0, color="black", linestyle="--", linewidth=1)
    ax.set_xticks(np.arange(len(wls)))
    ax.set_xticklabels([f"{w}\n{inten.get(w, np.nan):.0f} FLOP/byte" for w in wls], fontsize=8)
    ax.set_ylabel("best scaling efficiency X_N/(N·X₁)")
    ax.set_ylim(0, max(1.15, float(np.nanmax(b["efficiency"])) * 1.25 if len(b) else 1.15))
    ax.legend(fontsize=7, frameon=False, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    ax.set_title(
        "Finding 1: the best method's scaling efficiency per workload\n(low to high model intensity, left to right)",
        fontsize=10,
    )
    return fig


def architecture_figure(summary: pd.DataFrame, sp: pd.DataFrame) -> plt.Figure:
    """Per workload and N: each method's throughput relative to the best on each network (slow to fast)."""
    s = _cells(summary)
    keys = sorted(set(zip(sp["workload"], sp["workers"])))
    names = _series_order(s)
    colors = scheme_colors(names)
    nets = sp.groupby("network")["rate"].first().sort_values().index.tolist()
    wls, ns = sorted({k[0] for k in keys}), sorted({k[1] for k in keys})
    fig, axes = plt.subplots(
        len(wls),
        len(ns),
        figsize=(3.6 * len(ns) + 2.2, 2.9 * len(wls)),
        squeeze=False,
        layout="constrained",
        sharey=True,
    )
    for wl, n in keys:  # a row per workload, a column per worker count
        ax = axes[wls.index(wl)][ns.index(n)]
        d = s[(s["workload"] == wl) & (s["workers"] == n)]
        best = d.groupby("network")["throughput_median"].max()
        for name in [m for m in names if m in set(d["series"])]:
            r = d[d["series"] == name].set_index("network")
            ys = [r.loc[net, "throughput_median"] / best[net] if net in r.index else np.nan for net in nets]
            ax.plot(
                range(len(nets)),
                ys,
                marker="o",
                markersize=4,
                linewidth=1,
                color=colors[name],
                label=name,
                linestyle="--" if architecture(name.split("/")[0].split(" ")[0]) == "parameter server" else "-",
            )
        ax.set_xticks(range(len(nets)))
        ax.set_xticklabels(nets, fontsize=8)
        ax.set_title(f"{wl}, N={int(n)}", fontsize=10)
        ax.grid(alpha=0.3)
    for row in axes:
        row[0].set_ylabel("X / best X on that link", fontsize=8)
    _figure_legend(fig, axes, loc="outside right center", ncol=1, title="solid: all-reduce\ndashed: parameter server")
    fig.suptitle("Finding 2: methods relative to the winner, slow link to fast link", fontsize=10)
    return fig


def findings(summary: pd.DataFrame) -> list[tuple]:
    """The findings section's blocks: paragraphs and (figure, file, caption)."""
    blocks = []
    text1, b = finding_intensity(summary)
    blocks.append(("p", text1))
    if len(b) and len({w for w, i in intensities(summary).items() if np.isfinite(i)}) >= 2:
        blocks.append(
            (
                "fig",
                intensity_figure(b, intensities(summary)),
                "finding-intensity.png",
                "Best scaling efficiency any method reaches, per workload (left: lowest model intensity), "
                "per network and worker count; label: the efficiency and the method; dashed: ideal.",
            )
        )
    text2, sp = finding_architecture(summary)
    blocks.append(("p", text2))
    if len(sp) and sp["network"].nunique() >= 2:
        blocks.append(
            (
                "fig",
                architecture_figure(summary, sp),
                "finding-architecture.png",
                "Each method's median throughput divided by the best method's on the same link (1 = the "
                "winner), per workload and worker count, slow link left; solid lines all-reduce methods, "
                "dashed parameter-server methods.",
            )
        )
    return blocks
