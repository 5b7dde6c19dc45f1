"""(d) The time breakdown figure (pure: DataFrame -> matplotlib Figure; render.py saves it).

Per cell, stacked medians of the slowest rank's phases: forward, the wait inside forward (ByteScheduler's
pre-hooks wait there for the previous iteration's communication; drawn only where measured), backward,
the communication wait after backward and the optimizer step; the median iteration as a tick and the
exposed communication (iteration - 1-worker compute-only iteration) written beside it.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from harness.report.data import PHASES, measured, networks, ok, with_series
from harness.report.figures import _figure_legend, _no_data, _series_order, plt

PHASE_COLORS = {
    "forward_s": "#4c78a8",
    "forward_wait_s": "#f58518",
    "backward_s": "#72b7b2",
    "comm_wait_s": "#e45756",
    "optimizer_s": "#b279a2",
}
PHASE_LABELS = {
    "forward_s": "forward",
    "forward_wait_s": "wait in forward (ByteScheduler pre-hooks)",
    "backward_s": "backward (incl. overlapped comm)",
    "comm_wait_s": "comm wait after backward",
    "optimizer_s": "optimizer step",
}


def breakdown_phases(s: pd.DataFrame) -> list[str]:
    """The stacked phases: the wait inside forward (forward_wait_s) only where it was measured and is
    non-zero somewhere (runs recorded before it, or schemes that never wait there, draw four)."""
    wait = s["forward_wait_s"] if "forward_wait_s" in s else pd.Series(dtype=float)
    with_wait = bool((wait.fillna(0) > 0).any())
    return [p for p in ("forward_s", "forward_wait_s", *PHASES[1:]) if p != "forward_wait_s" or with_wait]


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
    fig, axes = plt.subplots(
        len(wls),
        1,
        figsize=(8.5, sum(0.27 * c + 1.0 for c in counts)),
        squeeze=False,
        layout="constrained",
        height_ratios=[0.27 * c + 1.0 for c in counts],
    )
    for k, wl in enumerate(wls):
        ax = axes[k][0]
        d = s[s["workload"] == wl].copy()
        d["_o"] = d["series"].map(rank)
        d = d.sort_values(["network", "_o", "workers"])
        labels = [
            f"{r['series']} N={int(r['workers'])}" + (f" @{r['network']}" if len(nets) > 1 else "")
            for _, r in d.iterrows()
        ]
        y = np.arange(len(d))[::-1]
        left = np.zeros(len(d))
        for p in breakdown_phases(s):
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
    fig.suptitle(
        "Time breakdown per cell; exposed comm = median iteration - 1-worker compute-only iteration", fontsize=9
    )
    return fig
