"""The one-node calibration in the study's report (harness/predict/study_calibration.py; docs/ARCHITECTURE.md,
"Calibration"): the fitted parameters beside their sourced ranges, the fitted cells, leave-one-workload-out, and
the calibrated curve beside the uncalibrated one."""

from __future__ import annotations

import math

import pandas as pd


def _num(x: float, unit: str) -> str:
    if not isinstance(x, (int, float)) or not math.isfinite(x):
        return "-"
    if unit == "s":
        return f"{x * 1e6:.3g} us"
    return f"{x:.3g}"


def params_table(table: pd.DataFrame) -> str:
    """One row per fitted parameter: value, interval, sourced range, whether the cells determine it and which."""
    lines = ["| parameter | fitted | 10th-90th pct | sourced value [range] | inside the sourced range | "
             "determined by |", "|---|---|---|---|---|---|"]
    for r in table.itertuples():
        unit = r.unit
        u = "" if unit in ("s", "x") else f" {unit}"
        inside = "-" if r.inside_sourced is None else ("yes" if r.inside_sourced else "**no**")
        det = ", ".join(f"{k[0]} {k[2]}" for k in r.cells) if r.determined else \
            "nothing: not determined by one node (its sourced range is kept)"
        lines.append(f"| `{r.parameter}` | {_num(r.value, unit)}{u} | {_num(r.low, unit)}-{_num(r.high, unit)} | "
                     f"{_num(r.sourced_value, unit)} [{_num(r.sourced_low, unit)}-{_num(r.sourced_high, unit)}] | "
                     f"{inside} | {det} |")
    return "\n".join(lines)


def cells_table(cells: pd.DataFrame) -> str:
    """Measured and fitted throughput of every one-node cell, the three network columns as their mean."""
    t = cells.groupby(["workload", "scheme"], sort=False).agg(measured=("measured", "mean"),
                                                              predicted=("predicted", "mean"),
                                                              spread=("measured", lambda x: x.max() / x.min() - 1))
    t["error"] = t["predicted"] / t["measured"] - 1
    lines = ["| workload | method | measured (mean of 3 networks) | fitted | error | measured spread over networks |",
             "|---|---|---|---|---|---|"]
    for (w, m), r in t.iterrows():
        lines.append(f"| {w} | {m} | {r.measured:.1f} | {r.predicted:.1f} | {r.error:+.1%} | {r.spread:.1%} |")
    return "\n".join(lines)


def lowo_table(summary: pd.DataFrame) -> str:
    """Leave-one-workload-out per method: the median error of each held-out workload's cells, median |error|."""
    held = [c for c in summary.columns if c not in ("median_abs", "max_abs")]
    lines = ["| method | " + " | ".join(f"{h} held out" for h in held) + " | median abs | max abs |",
             "|---|" + "---|" * (len(held) + 2)]
    for m, r in summary.iterrows():
        lines.append(f"| {m} | " + " | ".join(f"{r[h]:+.1%}" for h in held)
                     + f" | {r['median_abs']:.1%} | {r['max_abs']:.1%} |")
    return "\n".join(lines)


def comparison_table(cal: pd.DataFrame, raw: pd.DataFrame, methods: list[str]) -> str:
    """Per size: the best method per (workload, network) row calibrated and uncalibrated, and how far the
    calibrated curve moved each method (median change of its cells)."""
    key = ["workload", "network", "workers", "scheme"]
    both = cal[key + ["throughput_median"]].merge(raw[key + ["throughput_median"]], on=key, suffixes=("", "_raw"))
    both = both[both["scheme"].isin(methods)]
    both["change"] = both["throughput_median"] / both["throughput_median_raw"] - 1
    lines = ["| GPUs | best (calibrated) | best (uncalibrated) | rows where they differ | "
             + " | ".join(methods) + " |", "|---|---|---|---|" + "---|" * len(methods)]
    for n in sorted(both["workers"].unique()):
        at = both[both["workers"] == n]
        best = {}
        for col in ("throughput_median", "throughput_median_raw"):
            idx = at.groupby(["workload", "network"])[col].idxmax()
            best[col] = at.loc[idx].set_index(["workload", "network"])["scheme"]
        tally = {c: ", ".join(f"{m} {k}" for m, k in b.value_counts().items()) for c, b in best.items()}
        differ = int((best["throughput_median"] != best["throughput_median_raw"]).sum())
        per = at.groupby("scheme")["change"].median()
        lines.append(f"| {int(n)} | {tally['throughput_median']} | {tally['throughput_median_raw']} | {differ} of "
                     f"{len(best['throughput_median'])} | " + " | ".join(f"{per.get(m, math.nan):+.0%}" for m in methods)
                     + " |")
    return "\n".join(lines)
