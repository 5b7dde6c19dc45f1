"""Predictions in the study's style (pure: DataFrame -> Markdown or matplotlib Figure; the caller
saves): a per-network table, grouped bars (one panel per workload, one group per network, one bar per
method, the ideal N * X_1 as a line), and predicted vs measured iteration times of validate()'s cells.
The report's other figures are in figures.py and figures_model.py, on the same matplotlib set-up."""

from __future__ import annotations

import pandas as pd

from harness.report.figures import plt

NETWORK_ORDER = ["ib-100g", "ipoib-100g", "eth-25g", "eth-10g"]


def _ordered(values, preferred):
    vals = list(dict.fromkeys(values))
    return [v for v in preferred if v in vals] + [v for v in vals if v not in preferred]


def markdown_table(df: pd.DataFrame, methods: list[str] | None = None) -> str:
    """Rows (workload, method); per network: throughput (samples/s) and scaling efficiency."""
    nets = _ordered(df["network"], NETWORK_ORDER)
    methods = methods or list(dict.fromkeys(df["scheme"]))
    head = "| workload | method | " + " | ".join(f"{n}: X/s | {n}: eff." for n in nets) + " |"
    sep = "|---|---|" + "---:|---:|" * len(nets)
    lines = [head, sep]
    for wl in dict.fromkeys(df["workload"]):
        for meth in methods:
            cells = []
            for n in nets:
                r = df[(df["workload"] == wl) & (df["scheme"] == meth) & (df["network"] == n)]
                if r.empty:
                    cells += ["-", "-"]
                else:
                    r = r.iloc[0]
                    cells += [f"{r['throughput_median']:.0f}", f"{r['scaling_efficiency']:.2f}"]
            lines.append(f"| {wl} | {meth} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def predicted_bars(df: pd.DataFrame, methods: list[str] | None = None, title: str = "") -> plt.Figure:
    workloads = list(dict.fromkeys(df["workload"]))
    nets = _ordered(df["network"], NETWORK_ORDER)
    methods = methods or list(dict.fromkeys(df["scheme"]))
    fig, axes = plt.subplots(1, len(workloads), figsize=(5.2 * len(workloads), 4.8), squeeze=False)
    width = 0.8 / max(1, len(methods))
    colors = plt.get_cmap("tab10").colors
    for ax, wl in zip(axes[0], workloads):
        sub = df[df["workload"] == wl]
        for k, meth in enumerate(methods):
            ys = []
            for n in nets:
                r = sub[(sub["scheme"] == meth) & (sub["network"] == n)]
                ys.append(float(r["throughput_median"].iloc[0]) if len(r) else 0.0)
            ax.bar([i + (k - (len(methods) - 1) / 2) * width for i in range(len(nets))], ys, width,
                   label=meth, color=colors[k % len(colors)])
        ideal = sub["baseline_throughput"].iloc[0] * sub["workers"].iloc[0]
        ax.axhline(ideal, color="black", linestyle="--", linewidth=1, label=f"ideal N*X1 (N={sub['workers'].iloc[0]})")
        ax.set_xticks(range(len(nets)))
        ax.set_xticklabels(nets)
        unit = sub["sample_unit"].iloc[0]
        ax.set_title(wl)
        ax.set_ylabel(f"predicted throughput, {unit}/s")
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=min(len(labels), 8), fontsize=8)
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout(rect=(0, 0.09, 1, 0.96))
    return fig


def validation_scatter(v: pd.DataFrame, title: str = "") -> plt.Figure:
    """Scatter of validate()'s cells, log-log, with the y = x line and +-25 % bands."""
    fig, ax = plt.subplots(figsize=(5.5, 5))
    markers = dict(zip(sorted(v["workers"].unique()), "osD^v<>p*h"))
    for k, (wl, g) in enumerate(v.groupby("workload")):
        for workers, sub in g.groupby("workers"):
            marker = markers.get(workers, "x")
            ax.scatter(sub["measured_iter_s"] * 1000, sub["predicted_iter_s"] * 1000, marker=marker,
                       color=f"C{k}", label=f"{wl}, {workers} worker(s)")
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
