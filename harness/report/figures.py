"""The report's measured-performance figures: pure functions DataFrame -> matplotlib Figure.

    fig = throughput_vs_workers(summary)      # (a) one panel per workload, ideal line N * X_1
    fig = efficiency_heatmap(summary)         # (b) scheme x workload at the largest worker count
    fig = grouped_bars(summary)               # (c) the study's grouped bars: per network, else per N
    (d) the time breakdown is in breakdown.py

Nothing here reads or writes files; render.py saves the figures. Every axis says what its numbers are:
markers are median throughputs over iterations (slowest rank per iteration), vertical bars the 95%
confidence interval of the mean (harness.measure.stats). Failed cells are written into the panels, never
left out silently. Figures (e) commbench and (f) predicted vs measured are in figures_model.py.
"""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")  # no display: the report is files (must precede pyplot)
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from harness.report.data import (
    failed,
    largest_workers,
    measured,
    networks,
    ok,
    schemes,
    with_series,
)

MEDIAN_CI = "markers: median over iterations; bars: 95% CI of the mean"


def scheme_colors(names) -> dict[str, tuple]:
    """A fixed colour per series name, the same in every figure."""
    cmap = plt.get_cmap("tab10" if len(names) <= 10 else "tab20")
    return {n: cmap(i % cmap.N) for i, n in enumerate(names)}


def _unit(df: pd.DataFrame) -> str:
    units = sorted({u for u in df.get("sample_unit", pd.Series(dtype=str)).dropna() if u})
    return "/".join(units) or "samples"


def _panels(n_rows: int, n_cols: int, w: float, h: float, sharey: bool = False):
    fig, axes = plt.subplots(
        n_rows, n_cols, figsize=(w * n_cols, h * n_rows), squeeze=False, layout="constrained", sharey=sharey
    )
    return fig, axes


def _series_order(df: pd.DataFrame) -> list[str]:
    order = schemes(df, include_local=True)
    rank = {s: i for i, s in enumerate(order)}
    return sorted(df["series"].unique(), key=lambda s: (rank.get(s.split("/")[0].split(" ")[0], 99), s))


def _failed_note(ax, rows: pd.DataFrame) -> None:
    if rows.empty:
        return
    items = [f"{r['series']} N={int(r['workers'])}" for _, r in rows.iterrows()]
    ax.text(
        0.01,
        0.99,
        "failed: " + ", ".join(items),
        transform=ax.transAxes,
        va="top",
        ha="left",
        fontsize=7,
        color="#b00020",
        wrap=True,
    )


def _no_data(title: str) -> plt.Figure:
    fig, ax = plt.subplots(figsize=(5, 2))
    ax.axis("off")
    ax.text(0.5, 0.5, title, ha="center", va="center")
    return fig


# ------------------------------------------------------------------------------------- (a) scaling

MARKERS = ("o", "s", "^", "D", "v", "P", "X", "<", ">", "h", "*", "p")
LOCAL_LABEL = "1 worker, no communication (X₁, measured)"


def _dodge(names: list[str], ws: list) -> dict[str, float]:
    """A small horizontal offset per series so schemes at one worker count do not hide each other:
    spread over at most 40% of the gap between neighbouring worker counts."""
    gap = min(np.diff(sorted(set(ws)))) if len(set(ws)) > 1 else 1.0
    width = 0.4 * gap
    k = len(names)
    return {n: (width * (i / (k - 1) - 0.5) if k > 1 else 0.0) for i, n in enumerate(names)}


def throughput_vs_workers(summary: pd.DataFrame) -> plt.Figure:
    """(a) Median throughput vs workers, one line per scheme (own marker, small horizontal dodge), the
    measured 1-worker baseline as a marker at N=1 and the ideal N * X_1; one panel per workload (and per
    network when several); the legend outside the panels."""
    allm = with_series(measured(summary))
    allm = allm.assign(network=allm["network"].fillna("unknown").astype(str)) if not allm.empty else allm
    s = ok(allm)
    if s.empty:
        return _no_data("no measured cells finished")
    nets, wls = networks(allm), sorted(allm["workload"].unique())
    names = _series_order(allm[allm["scheme"] != "local"])
    colors = scheme_colors(names)
    markers = {n: MARKERS[i % len(MARKERS)] for i, n in enumerate(names)}
    fig, axes = _panels(len(nets), len(wls), max(4.6, 7.0 / len(wls)), 3.6)
    for i, net in enumerate(nets):
        for j, wl in enumerate(wls):
            ax = axes[i][j]
            here = s[(s["workload"] == wl) & (s["network"] == net)]
            lines = here[here["scheme"] != "local"]
            ws = sorted(allm.loc[(allm["workload"] == wl) & (allm["network"] == net), "workers"].unique())
            dx = _dodge(names, [*ws, 1])
            for name in [n for n in names if n in set(lines["series"])]:
                d = lines[lines["series"] == name].sort_values("workers")
                x = d["workers"] + dx[name]
                ax.plot(
                    x,
                    d["throughput_median"],
                    marker=markers[name],
                    color=colors[name],
                    label=name,
                    markersize=5,
                    linewidth=1,
                )
                ax.vlines(
                    x, d["throughput_ci95_low"], d["throughput_ci95_high"], color=colors[name], linewidth=1.2, alpha=0.8
                )
            _local_marker(ax, here)
            x1 = _baseline_x1(here)
            n_max = int(max(here["workers"].max() if len(here) else 1, 1))
            if np.isfinite(x1):
                ns = np.arange(1, n_max + 1)
                ax.plot(ns, ns * x1, "k--", linewidth=1, label="ideal N·X₁")
            ax.set_xticks(sorted(set(ws) | {1}))
            ax.set_xlim(0.5, n_max + 0.5)
            ax.set_ylim(bottom=0)
            title = wl if len(nets) == 1 else f"{wl} @ {net}"
            ax.set_title(title if np.isfinite(x1) else f"{title} (no 1-worker baseline)", fontsize=10)
            ax.set_xlabel("workers N (schemes offset slightly for legibility)", fontsize=8)
            ax.set_ylabel(f"throughput ({_unit(here)}/s)")
            ax.grid(alpha=0.3)
            _failed_note(ax, failed(allm[(allm["workload"] == wl) & (allm["network"] == net)]))
    _figure_legend(fig, axes, loc="outside right center", ncol=1)
    fig.suptitle(f"Throughput vs workers\n({MEDIAN_CI})", fontsize=10)
    return fig


def _local_marker(ax, here: pd.DataFrame) -> None:
    """The measured `local` cell (1 worker, no communication) at N=1, with its CI."""
    loc = here[(here["scheme"] == "local") & (here["workers"] == 1)]
    if loc.empty:
        return
    ax.plot(
        [1] * len(loc),
        loc["throughput_median"],
        marker="*",
        markersize=11,
        color="black",
        linestyle="",
        label=LOCAL_LABEL,
        zorder=4,
    )
    ax.vlines([1] * len(loc), loc["throughput_ci95_low"], loc["throughput_ci95_high"], color="black", linewidth=1.2)


def _baseline_x1(rows: pd.DataFrame) -> float:
    b = rows["baseline_throughput"].dropna() if "baseline_throughput" in rows else pd.Series(dtype=float)
    if len(b):
        return float(b.median())
    local = rows[(rows["scheme"] == "local") & (rows["workers"] == 1)]["throughput_median"].dropna()
    return float(local.median()) if len(local) else float("nan")


def _figure_legend(fig, axes, loc: str = "outside lower center", ncol: int = 3, title: str | None = None) -> None:
    handles, labels = {}, []
    for ax in np.ravel(axes):
        for h, lab in zip(*ax.get_legend_handles_labels()):
            if lab not in handles:
                handles[lab] = h
                labels.append(lab)
    if labels:
        fig.legend(
            [handles[lab] for lab in labels],
            labels,
            loc=loc,
            fontsize=8,
            title=title,
            title_fontsize=7,
            frameon=False,
            ncol=min(len(labels), ncol),
        )


# ---------------------------------------------------------------------------------- (b) heat map


def efficiency_heatmap(summary: pd.DataFrame) -> plt.Figure:
    """(b) Scaling efficiency X_N / (N X_1), scheme x workload, at each workload's largest N."""
    top = largest_workers(with_series(measured(summary)))
    if top.empty:
        return _no_data("no multi-worker cells to show")
    nets = networks(top)
    cols = [
        (wl, net)
        for wl in sorted(top["workload"].unique())
        for net in nets
        if ((top["workload"] == wl) & (top["network"] == net)).any()
    ]
    rows = _series_order(top)
    grid = np.full((len(rows), len(cols)), np.nan)
    text = [["n/a"] * len(cols) for _ in rows]
    for j, (wl, net) in enumerate(cols):
        for i, name in enumerate(rows):
            d = top[(top["workload"] == wl) & (top["network"] == net) & (top["series"] == name)]
            if d.empty:
                continue
            r = d.iloc[0]
            if r["status"] != "ok":
                text[i][j] = "failed"
            elif pd.notna(r.get("scaling_efficiency")):
                grid[i, j] = r["scaling_efficiency"]
                text[i][j] = f"{r['scaling_efficiency']:.2f}"
            else:
                text[i][j] = "no X₁"
    fig, ax = plt.subplots(figsize=(max(5.0, 2.2 + 1.5 * len(cols)), 1.6 + 0.42 * len(rows)), layout="constrained")
    vmax = max(1.0, float(np.nanmax(grid)) if np.isfinite(grid).any() else 1.0)
    im = ax.imshow(np.ma.masked_invalid(grid), cmap="viridis", vmin=0.0, vmax=vmax, aspect="auto")
    ax.set_facecolor("#dddddd")
    for i in range(len(rows)):
        for j in range(len(cols)):
            v = grid[i, j]
            dark = np.isfinite(v) and v / vmax < 0.6
            ax.text(
                j,
                i,
                text[i][j],
                ha="center",
                va="center",
                fontsize=9,
                color="white" if dark else ("#b00020" if text[i][j] == "failed" else "black"),
            )
    ax.set_xticks(range(len(cols)))
    ns = {c: int(top[(top["workload"] == c[0]) & (top["network"] == c[1])]["workers"].max()) for c in cols}
    ax.set_xticklabels(
        [f"{wl}\nN={ns[(wl, net)]}" + (f"\n{net}" if len(nets) > 1 else "") for wl, net in cols], fontsize=8
    )
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels(rows, fontsize=8)
    cb = fig.colorbar(im, ax=ax, shrink=0.9)
    cb.set_label("scaling efficiency X_N / (N·X₁)", fontsize=8)
    ax.set_title("Scaling efficiency at the largest worker count\n(X = median throughput)", fontsize=10)
    return fig


# ---------------------------------------------------------------------------- (c) grouped bars


def _bar_values(d: pd.DataFrame, names: list[str], metric: str) -> tuple[list, list, list, list]:
    """Per series of one bar group: height, CI low, CI high, and "failed" where the cell failed."""
    heights, lo, hi, marks = [], [], [], []
    for name in names:
        r = d[d["series"] == name]
        r = r.iloc[0] if len(r) else None
        okay = r is not None and r["status"] == "ok"
        y = (r["throughput_median"] if metric == "throughput" else r["scaling_efficiency"]) if okay else np.nan
        heights.append(y)
        lo.append(r["throughput_ci95_low"] if okay else np.nan)
        hi.append(r["throughput_ci95_high"] if okay else np.nan)
        marks.append("failed" if (r is not None and not okay) else "")
    return heights, lo, hi, marks


def grouped_bars(summary: pd.DataFrame, metric: str = "throughput") -> plt.Figure:
    """(c) x = scheme, one bar per network (runs merged) at the largest N, else one bar per worker
    count; y = median throughput (with the 95% CI of the mean) or scaling efficiency."""
    if metric not in ("throughput", "efficiency"):
        raise ValueError(f"metric must be throughput or efficiency, not {metric!r}")
    allm = with_series(measured(summary))
    allm = allm[allm["scheme"] != "local"] if not allm.empty else allm
    if allm.empty:
        return _no_data("no multi-worker cells to show")
    allm = allm.assign(network=allm["network"].fillna("unknown").astype(str))
    by_network = len(networks(allm)) > 1
    if by_network:
        allm = largest_workers(allm)
        allm = allm.assign(group=allm["network"])
    else:
        allm = allm.assign(group="N=" + allm["workers"].astype(int).astype(str))
    wls = sorted(allm["workload"].unique())
    names = _series_order(allm)
    fig, axes = _panels(len(wls), 1, max(6.0, 0.75 * len(names) + 2), 3.4)
    groups = sorted(allm["group"].unique(), key=lambda g: (len(g), g))
    cmap = plt.get_cmap("Set2")
    width = 0.8 / max(len(groups), 1)
    for k, wl in enumerate(wls):
        ax = axes[k][0]
        d = allm[allm["workload"] == wl]
        x = np.arange(len(names))
        for gi, g in enumerate(groups):
            heights, lo, hi, marks = _bar_values(d[d["group"] == g], names, metric)
            xs = x - 0.4 + width * (gi + 0.5)
            ax.bar(xs, np.nan_to_num(heights), width * 0.95, color=cmap(gi % cmap.N), label=g)
            if metric == "throughput":
                ax.vlines(xs, lo, hi, color="black", linewidth=1)
            for xi, m in zip(xs, marks):
                if m:
                    ax.text(xi, 0, "failed", rotation=90, ha="center", va="bottom", fontsize=7, color="#b00020")
        if metric == "efficiency":
            ax.axhline(1.0, color="black", linestyle="--", linewidth=1, label="ideal")
        ax.set_xticks(x)
        ax.set_xticklabels(names, rotation=25, ha="right", fontsize=8)
        ax.set_ylabel(
            f"median throughput ({_unit(d)}/s)" if metric == "throughput" else "scaling efficiency X_N/(N·X₁)"
        )
        n_note = f", N={int(d['workers'].max())}" if by_network else ""
        ax.set_title(f"{wl}{n_note}", fontsize=10)
        ax.grid(axis="y", alpha=0.3)
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(
        handles,
        labels,
        title="network" if by_network else "workers",
        fontsize=8,
        title_fontsize=8,
        loc="outside lower center",
        ncol=len(labels),
        frameon=False,
    )
    what = "median throughput, bars: 95% CI of the mean" if metric == "throughput" else "scaling efficiency"
    fig.suptitle(f"Per scheme, {'per network' if by_network else 'per worker count'} ({what})", fontsize=10)
    return fig
