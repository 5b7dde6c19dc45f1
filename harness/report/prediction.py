"""Predictions in the study's style (pure: DataFrame -> matplotlib Figure; the caller saves, `save`):
predicted vs measured iteration times of validate()'s cells. The report's other figures are in figures.py and
figures_model.py, on the same matplotlib set-up."""

from __future__ import annotations

import pandas as pd

from harness.report.figures import plt


def validation_scatter(v: pd.DataFrame, title: str = "") -> plt.Figure:
    """Scatter of validate()'s cells, log-log, with the y = x line and +-25 % bands."""
    fig, ax = plt.subplots(figsize=(5.5, 5))
    markers = dict(zip(sorted(v["workers"].unique()), "osD^v<>p*h"))
    for k, (wl, g) in enumerate(v.groupby("workload")):
        for workers, sub in g.groupby("workers"):
            marker = markers.get(workers, "x")
            ax.scatter(
                sub["measured_iter_s"] * 1000,
                sub["predicted_iter_s"] * 1000,
                marker=marker,
                color=f"C{k}",
                label=f"{wl}, {workers} worker(s)",
            )
    lo = min(v["measured_iter_s"].min(), v["predicted_iter_s"].min()) * 1000 * 0.8
    hi = max(v["measured_iter_s"].max(), v["predicted_iter_s"].max()) * 1000 * 1.25
    xs = [lo, hi]
    ax.plot(xs, xs, "k-", linewidth=1, label="y = x")
    ax.plot(xs, [x * 1.25 for x in xs], "k:", linewidth=0.8, label="+-25 %")
    ax.plot(xs, [x / 1.25 for x in xs], "k:", linewidth=0.8)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("measured iteration, ms")
    ax.set_ylabel("predicted iteration, ms")
    ax.set_title(title or f"median APE {v.attrs.get('median_ape_pct', float('nan')):.1f} %", fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def save(fig: plt.Figure, path, dpi: int = 120):
    """Write a figure as PNG (its folder made first) and free it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=dpi)
    plt.close(fig)
    return path
