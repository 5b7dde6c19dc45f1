"""The report's measured-performance figures: pure functions DataFrame -> matplotlib Figure.

    fig = throughput_vs_workers(summary)      # (a) one panel per workload, ideal line N * X_1
    fig = efficiency_heatmap(summary)         # (b) scheme x workload at the largest worker count
    fig = grouped_bars(summary)               # (c) the study's grouped bars: per network, else per N
    fig = breakdown(summary)                  # (d) forward/backward/comm wait/optimizer, stacked

Nothing here reads or writes files; render.py saves the figures. Every axis says what its numbers are:
markers are median throughputs over iterations (slowest rank per iteration), vertical bars the 95%
confidence interval of the mean (harness.measure.stats). Failed cells are written into the panels, never
left out silently. Figures (e) commbench and (f) predicted vs measured are in figures_model.py.
"""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")  # no display: the report is files (must precede pyplot)
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from harness.report.data import (PHASES, failed, largest_workers, measured, networks, ok, schemes,  # noqa: E402
                                 with_series)

MEDIAN_CI = "markers: median over iterations; bars: 95% CI of the mean"
PHASE_COLORS = {"forward_s": "#4c78a8", "backward_s": "#72b7b2", "comm_wait_s": "#e45756",
                "optimizer_s": "#b279a2"}
PHASE_LABELS = {"forward_s": "forward", "backward_s": "backward (incl. overlapped comm)",
                "comm_wait_s": "comm wait after backward", "optimizer_s": "optimizer step"}


def scheme_colors(names) -> dict[str, tuple]:
    """A fixed colour per series name, the same in every figure."""
    cmap = plt.get_cmap("tab10" if len(names) <= 10 else "tab20")
    return {n: cmap(i % cmap.N) for i, n in enumerate(names)}


def _unit(df: pd.DataFrame) -> str:
    units = sorted({u for u in df.get("sample_unit", pd.Series(dtype=str)).dropna() if u})
    return "/".join(units) or "samples"


def _panels(n_rows: int, n_cols: int, w: float, h: float, sharey: bool = False):
    fig, axes = plt.subplots(n_rows, n_cols, figsize=(w * n_cols, h * n_rows), squeeze=False,
                             layout="constrained", sharey=sharey)
    return fig, axes


def _series_order(df: pd.DataFrame) -> list[str]:
    order = schemes(df, include_local=True)
    rank = {s: i for i, s in enumerate(order)}
    return sorted(df["series"].unique(), key=lambda s: (rank.get(s.split("/")[0].split(" ")[0], 99), s))


def _failed_note(ax, rows: pd.DataFrame) -> None:
    if rows.empty:
        return
    items = [f"{r['series']} N={int(r['workers'])}" for _, r in rows.iterrows()]
    ax.text(0.01, 0.99, "failed: " + ", ".join(items), transform=ax.transAxes, va="top", ha="left",
            fontsize=7, color="#b00020", wrap=True)


def _no_data(title: str) -> plt.Figure:
    fig, ax = plt.subplots(figsize=(5, 2))
    ax.axis("off")
    ax.text(0.5, 0.5, title, ha="center", va="center")
    return fig


# ------------------------------------------------------------------------------------- (a) scaling

def throughput_vs_workers(summary: pd.DataFrame) -> plt.Figure:
    """(a) Median throughput vs workers, one line per scheme and the ideal N * X_1; one panel per
    workload (and per network when several)."""
    allm = with_series(measured(summary))
    allm = allm.assign(network=allm["network"].fillna("unknown").astype(str)) if not allm.empty else allm
    s = ok(allm)
    if s.empty:
        return _no_data("no measured cells finished")
    nets, wls = networks(allm), sorted(allm["workload"].unique())
    colors = scheme_colors(_series_order(allm[allm["scheme"] != "local"]))
    fig, axes = _panels(len(nets), len(wls), max(4.6, 7.0 / len(wls)), 3.6)
    for i, net in enumerate(nets):
        for j, wl in enumerate(wls):
            ax = axes[i][j]
            here = s[(s["workload"] == wl) & (s["network"] == net)]
            lines = here[here["scheme"] != "local"]
            for name in [n for n in colors if n in set(lines["series"])]:
                d = lines[lines["series"] == name].sort_values("workers")
                ax.plot(d["workers"], d["throughput_median"], marker="o", color=colors[name], label=name)
                ax.vlines(d["workers"], d["throughput_ci95_low"], d["throughput_ci95_high"],
                          color=colors[name], linewidth=1.2, alpha=0.8)
            x1 = _baseline_x1(here)
            n_max = int(max(here["workers"].max() if len(here) else 1, 1))
            if np.isfinite(x1):
                ns = np.arange(1, n_max + 1)
                ax.plot(ns, ns * x1, "k--", linewidth=1, label="ideal N·X₁ (X₁: 1 worker, no comm)")
            ws = sorted(allm.loc[(allm["workload"] == wl) & (allm["network"] == net), "workers"].unique())
            ax.set_xticks(ws)
            ax.set_ylim(bottom=0)
            title = wl if len(nets) == 1 else f"{wl} @ {net}"
            ax.set_title(title if np.isfinite(x1) else f"{title} (no 1-worker baseline)", fontsize=10)
            ax.set_xlabel("workers N")
            ax.set_ylabel(f"throughput ({_unit(here)}/s)")
            ax.grid(alpha=0.3)
            _failed_note(ax, failed(allm[(allm["workload"] == wl) & (allm["network"] == net)]))
    _figure_legend(fig, axes)
    fig.suptitle(f"Throughput vs workers\n({MEDIAN_CI})", fontsize=10)
    return fig


def _baseline_x1(rows: pd.DataFrame) -> float:
    b = rows["baseline_throughput"].dropna() if "baseline_throughput" in rows else pd.Series(dtype=float)
    if len(b):
        return float(b.median())
    local = rows[(rows["scheme"] == "local") & (rows["workers"] == 1)]["throughput_median"].dropna()
    return float(local.median()) if len(local) else float("nan")


def _figure_legend(fig, axes) -> None:
    handles, labels = {}, []
    for ax in np.ravel(axes):
        for h, lab in zip(*ax.get_legend_handles_labels()):
            if lab not in handles:
                handles[lab] = h
                labels.append(lab)
    if labels:
        fig.legend([handles[lab] for lab in labels], labels, loc="outside lower center", fontsize=8,
                   frameon=False, ncol=min(len(labels), 3))


# ---------------------------------------------------------------------------------- (b) heat map

def efficiency_heatmap(summary: pd.DataFrame) -> plt.Figure:
    """(b) Scaling efficiency X_N / (N X_1), scheme x workload, at each workload's largest N."""
    top = largest_workers(with_series(measured(summary)))
    if top.empty:
        return _no_data("no multi-worker cells to show")
    nets = networks(top)
    cols = [(wl, net) for wl in sorted(top["workload"].unique()) for net in nets
            if ((top["workload"] == wl) & (top["network"] == net)).any()]
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
    fig, ax = plt.subplots(figsize=(max(5.0, 2.2 + 1.5 * len(cols)), 1.6 + 0.42 * len(rows)),
                           layout="constrained")
    vmax = max(1.0, float(np.nanmax(grid)) if np.isfinite(grid).any() else 1.0)
    im = ax.imshow(np.ma.masked_invalid(grid), cmap="viridis", vmin=0.0, vmax=vmax, aspect="auto")
    ax.set_facecolor("#dddddd")
    for i in range(len(rows)):
        for j in range(len(cols)):
            v = grid[i, j]
            dark = np.isfinite(v) and v / vmax < 0.6
            ax.text(j, i, text[i][j], ha="center", va="center", fontsize=9,
                    color="white" if dark else ("#b00020" if text[i][j] == "failed" else "black"))
    ax.set_xticks(range(len(cols)))
    ns = {c: int(top[(top["workload"] == c[0]) & (top["network"] == c[1])]["workers"].max()) for c in cols}
    ax.set_xticklabels([f"{wl}\nN={ns[(wl, net)]}" + (f"\n{net}" if len(nets) > 1 else "") for wl, net in cols],
                       fontsize=8)
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
                    ax.text(xi, 0, "failed", rotation=90, ha="center", va="bottom", fontsize=7,
                            color="#b00020")
        if metric == "efficiency":
            ax.axhline(1.0, color="black", linestyle="--", linewidth=1, label="ideal")
        ax.set_xticks(x)
        ax.set_xticklabels(names, rotation=25, ha="right", fontsize=8)
        ax.set_ylabel(f"median throughput ({_unit(d)}/s)" if metric == "throughput"
                      else "scaling efficiency X_N/(N·X₁)")
        n_note = f", N={int(d['workers'].max())}" if by_network else ""
        ax.set_title(f"{wl}{n_note}", fontsize=10)
        ax.grid(axis="y", alpha=0.3)
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, title="network" if by_network else "workers", fontsize=8, title_fontsize=8,
               loc="outside lower center", ncol=len(labels), frameon=False)
    what = "median throughput, bars: 95% CI of the mean" if metric == "throughput" else "scaling efficiency"
    fig.suptitle(f"Per scheme, {'per network' if by_network else 'per worker count'} ({what})", fontsize=10)
    return fig


# ------------------------------------------------------------------------------- (d) breakdown

def breakdown(summary: pd.DataFrame) -> plt.Figure:
    """(d) Per cell, stacked medians of forward, backward, comm wait and optimizer (slowest rank),
    the median iteration as a tick, and exposed communication (iteration - 1-worker compute) noted."""
    s = ok(with_series(measured(summary)))
    if s.empty:
        return _no_data("no measured cells finished")
    s = s.assign(network=s["network"].fillna("unknown").astype(str))
    nets = networks(s)
    wls = sorted(s["workload"].unique())
    rank = {n: i for i, n in enumerate(_series_order(s))}
    counts = [len(s[s["workload"] == wl]) for wl in wls]
    fig, axes = plt.subplots(len(wls), 1, figsize=(8.5, sum(0.27 * c + 1.0 for c in counts)), squeeze=False,
                             layout="constrained", height_ratios=[0.27 * c + 1.0 for c in counts])
    for k, wl in enumerate(wls):
        ax = axes[k][0]
        d = s[s["workload"] == wl].copy()
        d["_o"] = d["series"].map(rank)
        d = d.sort_values(["network", "_o", "workers"])
        labels = [f"{r['series']} N={int(r['workers'])}" + (f" @{r['network']}" if len(nets) > 1 else "")
                  for _, r in d.iterrows()]
        y = np.arange(len(d))[::-1]
        left = np.zeros(len(d))
        for p in PHASES:
            v = d[p].fillna(0).to_numpy() * 1e3
            ax.barh(y, v, left=left, height=0.7, color=PHASE_COLORS[p], label=PHASE_LABELS[p])
            left += v
        it = d["iter_s_median"].to_numpy() * 1e3
        ax.scatter(it, y, marker="|", s=140, color="black", zorder=3, label="iteration (median)")
        for yi, t, end, e in zip(y, it, left, d["exposed_comm_s"].to_numpy() * 1e3):
            if np.isfinite(e):  # right of whichever ends later, the stacked phases or the iteration tick
                ax.text(max(t, end), yi, f"  exposed {e:.0f} ms", va="center", ha="left", fontsize=7)
        ax.set_yticks(y)
        ax.set_yticklabels(labels, fontsize=8)
        ax.set_xlim(0, max(np.nanmax(it), np.nanmax(left)) * 1.3)
        ax.set_title(wl, fontsize=10)
        ax.set_xlabel("ms per iteration (medians over iterations of the slowest rank's phases)", fontsize=8)
        ax.grid(axis="x", alpha=0.3)
    _figure_legend(fig, axes)
    fig.suptitle("Time breakdown per cell; exposed comm = median iteration - 1-worker compute-only "
                 "iteration", fontsize=9)
    return fig
