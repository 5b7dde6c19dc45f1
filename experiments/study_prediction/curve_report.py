"""The study's scaling curve as a report (pure: DataFrame -> Markdown or matplotlib Figure; the caller saves;
docs/ARCHITECTURE.md, "Predictor"): throughput and scaling efficiency against GPUs with each cell's interval as
a band, one figure per workload and one panel per network; per-size tables with `pred_low`-`pred_high`; the
study's qualitative findings stated from the prediction (which method wins where, where the parameter-server
architecture overtakes all-reduce, where a method stops scaling, how far BERT-Large gets on one node); the
sensitivity and inputs tables."""

from __future__ import annotations

import pandas as pd

from harness.report.figures import plt

PS = ("bsp-ps", "wfbp-ps", "bytescheduler-ps")
"""The parameter-server methods; every other method is all-reduce."""
GPUS_ONE_NODE = 4
"""One node of the study's cluster."""
NETWORK_ORDER = ["ib-100g", "ipoib-100g", "eth-25g", "eth-10g"]
"""The order the curve's panels and tables take the networks in (fastest first); others follow in their own order."""


def in_order(values, preferred) -> list:
    """The distinct `values`: those in `preferred` in its order, then the others in the order first seen."""
    vals = list(dict.fromkeys(values))
    return [v for v in preferred if v in vals] + [v for v in vals if v not in preferred]


def _x1(df: pd.DataFrame) -> pd.Series:
    """Each row's single-GPU throughput (what its scaling efficiency is relative to)."""
    return df["throughput_median"] / (df["scaling_efficiency"] * df["workers"])


def curve_figure(df: pd.DataFrame, workload: str, methods: list[str], metric: str = "throughput") -> plt.Figure:
    """One panel per network: `metric` (throughput, samples/s, or efficiency, X_N / (N X_1)) against GPUs,
    one line per method, its interval as a band; the ideal N X_1 as a dashed line."""
    sub = df[df["workload"] == workload]
    nets = in_order(sub["network"], NETWORK_ORDER)
    fig, axes = plt.subplots(1, len(nets), figsize=(5.0 * len(nets), 4.4), squeeze=False, sharey=True)
    colors = plt.get_cmap("tab10").colors
    for ax, net in zip(axes[0], nets):
        s = sub[sub["network"] == net]
        for k, meth in enumerate(methods):
            r = s[s["scheme"] == meth].sort_values("workers")
            if r.empty:
                continue
            x = r["workers"].to_numpy()
            scale = 1.0 if metric == "throughput" else 1.0 / (_x1(r) * r["workers"]).to_numpy()
            y = r["throughput_median"].to_numpy() * scale
            style = "--" if meth in PS else "-"
            ax.plot(x, y, style, marker="o", markersize=3, color=colors[k % len(colors)], label=meth)
            if "pred_low" in r:
                ax.fill_between(
                    x,
                    r["pred_low"].to_numpy() * scale,
                    r["pred_high"].to_numpy() * scale,
                    color=colors[k % len(colors)],
                    alpha=0.12,
                    linewidth=0,
                )
        if metric == "throughput" and len(s):
            xs = sorted(s["workers"].unique())
            x1 = float(_x1(s).iloc[0])
            ax.plot(xs, [x1 * n for n in xs], ":", color="black", linewidth=1, label="ideal N*X1")
        ax.set_xscale("log", base=2)
        ax.set_xticks(sorted(s["workers"].unique()))
        ax.set_xticklabels([str(int(n)) for n in sorted(s["workers"].unique())])
        ax.set_title(net)
        ax.set_xlabel("GPUs")
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("samples/s" if metric == "throughput" else "scaling efficiency X_N / (N X_1)")
    axes[0][-1].legend(fontsize=7, loc="best")
    what = "throughput" if metric == "throughput" else "scaling efficiency"
    fig.suptitle(f"{workload}: predicted {what} (bands: the inputs' 10-90% interval; dashed: parameter server)")
    fig.tight_layout()
    return fig


def size_table(df: pd.DataFrame, workers: int, methods: list[str], among: list[str] | None = None) -> str:
    """Rows (workload, network) at one size; per method `value [low-high]` samples/s; the best of `among`
    (default: all the methods) bold."""
    sub = df[df["workers"] == workers]
    head = "| workload | network | " + " | ".join(methods) + " |"
    lines = [head, "|---|---|" + "---:|" * len(methods)]
    for wl in dict.fromkeys(sub["workload"]):
        for net in in_order(sub[sub["workload"] == wl]["network"], NETWORK_ORDER):
            s = sub[(sub["workload"] == wl) & (sub["network"] == net)].set_index("scheme")
            best = s.loc[[m for m in (among or methods) if m in s.index], "throughput_median"].idxmax()
            cells = []
            for m in methods:
                if m not in s.index:
                    cells.append("-")
                    continue
                r = s.loc[m]
                text = f"{r['throughput_median']:.0f}"
                if "pred_low" in s:
                    text += f" [{r['pred_low']:.0f}-{r['pred_high']:.0f}]"
                cells.append(f"**{text}**" if m == best else text)
            lines.append(f"| {wl} | {net} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def best_methods(df: pd.DataFrame, methods: list[str]) -> pd.DataFrame:
    """Per (workload, network, workers): the best method, its throughput, the runner-up and the margin, and
    whether the runner-up's interval reaches the winner's value (the ranking is then within the uncertainty).
    Methods predicted alike (equal to 1e-9) are named together, the first in `methods` order leading."""
    rows = []
    sub = df[df["scheme"].isin(methods)]
    order = {m: i for i, m in enumerate(methods)}
    for (wl, net, n), s in sub.groupby(["workload", "network", "workers"], sort=False):
        s = s.assign(_o=s["scheme"].map(order)).sort_values(["throughput_median", "_o"], ascending=[False, True])
        a = s.iloc[0]
        same = s[abs(s["throughput_median"] / a["throughput_median"] - 1) < 1e-9]
        b = s.iloc[len(same)] if len(s) > len(same) else s.iloc[-1]
        rows.append(
            {
                "workload": wl,
                "network": net,
                "workers": int(n),
                "best": " = ".join(same["scheme"]),
                "throughput": a["throughput_median"],
                "runner_up": b["scheme"],
                "runner_up_throughput": b["throughput_median"],
                "margin": a["throughput_median"] / b["throughput_median"] - 1,
                "overlapping": bool("pred_high" in s and b["pred_high"] >= a["throughput_median"]),
                **(
                    {
                        "best_low": a["pred_low"],
                        "best_high": a["pred_high"],
                        "runner_up_low": b["pred_low"],
                        "runner_up_high": b["pred_high"],
                    }
                    if "pred_high" in s
                    else {}
                ),
            }
        )
    return pd.DataFrame(rows)


def best_table(best: pd.DataFrame, workers: int) -> str:
    """The best method of each (workload, network) row at one size, with the runner-up and both intervals."""
    b = best[best["workers"] == workers]
    lines = [
        "| workload | network | best | samples/s [interval] | runner-up | samples/s [interval] | margin |",
        "|---|---|---|---:|---|---:|---:|",
    ]
    span = lambda lo, hi: f" [{lo:.0f}-{hi:.0f}]" if pd.notna(lo) else ""
    for r in b.itertuples():
        lines.append(
            f"| {r.workload} | {r.network} | **{r.best}** | {r.throughput:.0f}"
            f"{span(getattr(r, 'best_low', None), getattr(r, 'best_high', None))} | {r.runner_up} | "
            f"{r.runner_up_throughput:.0f}"
            f"{span(getattr(r, 'runner_up_low', None), getattr(r, 'runner_up_high', None))} | "
            f"{r.margin:+.1%}{' (overlaps)' if r.overlapping else ''} |"
        )
    return "\n".join(lines)


# complex by design (C901): one finding per branch, each a sentence of the report
def findings(df: pd.DataFrame, methods: list[str]) -> list[str]:  # noqa: C901
    """The study's questions answered from the prediction, one sentence each."""
    out = []
    best = best_methods(df, methods)
    sizes = sorted(df["workers"].unique())
    for n in sizes:
        b = best[best["workers"] == n]
        counts = b["best"].value_counts()
        out.append(
            f"At {n} GPUs the predicted best method is "
            + ", ".join(f"{m} in {c} of {len(b)} (workload, network) rows" for m, c in counts.items())
            + f"; in {int(b['overlapping'].sum())} of them the runner-up's interval reaches the winner."
        )
    for (wl, net), s in df[df["scheme"].isin(methods)].groupby(["workload", "network"], sort=False):
        over = []
        for n in sizes:
            r = s[s["workers"] == n]
            ps = r[r["scheme"].isin(PS)]["throughput_median"].max()
            ar = r[~r["scheme"].isin(PS)]["throughput_median"].max()
            over.append((n, ps > ar, ps / ar - 1))
        first = next((n for n, won, _ in over if won), None)
        if first is None:
            out.append(
                f"{wl} on {net}: all-reduce stays ahead of the parameter servers at every size "
                f"(PS best vs all-reduce best at {sizes[-1]} GPUs: {over[-1][2]:+.0%})."
            )
        else:
            out.append(
                f"{wl} on {net}: the parameter-server architecture overtakes all-reduce from {first} GPUs "
                f"(by {dict((n, g) for n, _, g in over)[first]:+.0%} there, {over[-1][2]:+.0%} at "
                f"{sizes[-1]} GPUs)."
            )
    for (wl, net), s in df[df["scheme"].isin(methods)].groupby(["workload", "network"], sort=False):
        stalled = []
        for m in methods:
            r = s[s["scheme"] == m].sort_values("workers")
            if len(r) < 2:
                continue
            x = r["throughput_median"].to_numpy()
            w = r["workers"].to_numpy()
            stop = next((int(w[i + 1]) for i in range(len(x) - 1) if x[i + 1] < 1.2 * x[i]), None)
            if stop is not None:
                stalled.append(f"{m} ({stop})")
        if stalled:
            out.append(
                f"{wl} on {net}: doubling the GPUs gains less than 20% for "
                + ", ".join(stalled)
                + " (the size where it first happens)."
            )
    one = df[(df["workers"] == GPUS_ONE_NODE) & df["scheme"].isin(methods)]
    for wl, s in one.groupby("workload", sort=False):
        speed = s["throughput_median"] / _x1(s)
        lo, hi = speed.min(), speed.max()
        best_row = s.loc[s["throughput_median"].idxmax()]
        out.append(
            f"{wl} on one node (4 GPUs): speed-up over one GPU {lo:.2f}-{hi:.2f}x across the methods "
            f"(best {best_row['scheme']}, {best_row['throughput_median'] / _x1(s).loc[best_row.name]:.2f}x); "
            f"the network does not enter."
        )
    return out


def interval_summary(df: pd.DataFrame) -> dict:
    """Interval widths relative to the prediction: median, 90th percentile, widest cell."""
    w = (df["pred_high"] - df["pred_low"]) / df["throughput_median"]
    k = w.idxmax()
    r = df.loc[k]
    return {
        "median": float(w.median()),
        "p90": float(w.quantile(0.9)),
        "max": float(w.max()),
        "widest": f"{r['workload']} {r['scheme']} {r['network']} {int(r['workers'])} GPUs",
        "cells": len(w),
    }


def sensitivity_table(sens: pd.DataFrame, top: int = 15) -> str:
    lines = [
        "| input | end | value | cells moved > 5% | median change | largest change | cell moved most |",
        "|---|---|---:|---:|---:|---:|---|",
    ]
    for _, r in sens.head(top).iterrows():
        lines.append(
            f"| `{r['input']}` | {r['end']} | {r['value']:g} {r['unit']} | {r['cells_moved_5pct']} of "
            f"{r['cells']} | {r['median_change']:.1%} | {r['max_change']:+.1%} | {r['most_moved']} |"
        )
    return "\n".join(lines)


def inputs_table(rows: list[dict]) -> str:
    lines = ["| input | value | range | unit | kind | what | source |", "|---|---:|---|---|---|---|---|"]
    for r in rows:
        rng = "fixed" if r["low"] == r["high"] else f"{r['low']:g}-{r['high']:g}"
        lines.append(
            f"| `{r['input']}` | {r['value']:g} | {rng} | {r['unit']} | {r['kind']} | {r['what']} | {r['source']} |"
        )
    return "\n".join(lines)
