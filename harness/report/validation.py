"""Predicted vs measured, cell by cell: absolute percentage error of the iteration time, and its
median over the cells (`ddlbench predict --validate`; the join is report.data.match_predicted)."""

from __future__ import annotations

import math

import pandas as pd

from harness.report.data import match_predicted

KEYS = ["workload", "scheme", "workers", "batch_per_worker", "seq_len"]
"""Columns that identify a cell on both sides (servers too, when both sides have parameter servers)."""


def validate(predicted: pd.DataFrame, measured: pd.DataFrame, keys: list[str] | None = None) -> pd.DataFrame:
    """One row per cell found on both sides: predicted and measured median iteration time, the
    absolute percentage error |p - m| / m * 100, and the same for throughput. The median APE over
    the cells is in `.attrs["median_ape_pct"]` (NaN when no cell matches)."""
    keys = list(keys or KEYS)
    if (
        "network" not in keys
        and "network" in predicted
        and "network" in measured
        and set(predicted["network"]) & set(measured["network"])
    ):
        keys.append("network")  # same labels on both sides: a cell is predicted for its own network
    if "dtype" not in keys and "dtype" in predicted and "dtype" in measured:
        keys.append("dtype")  # a bf16 measurement is never matched to an fp32 prediction
    m = measured[(measured.get("status", "ok") == "ok")] if "status" in measured else measured
    m = m[m.get("source", "measured") != "predicted"] if "source" in m else m
    predicted, m = predicted.copy(), m.copy()
    for k in keys:  # a key numeric on one side (seq_len NaN for images) is numeric on both
        if (
            k in predicted
            and k in m
            and (pd.api.types.is_numeric_dtype(predicted[k]) != pd.api.types.is_numeric_dtype(m[k]))
        ):
            predicted[k], m[k] = pd.to_numeric(predicted[k]), pd.to_numeric(m[k])
    joined = match_predicted(predicted, m, keys, ["iter_s_median", "throughput_median"])
    out = pd.DataFrame({k: joined[k] for k in keys})
    out["predicted_iter_s"] = joined["iter_s_median_predicted"]
    out["measured_iter_s"] = joined["iter_s_median_measured"]
    out["ape_pct"] = (out["predicted_iter_s"] - out["measured_iter_s"]).abs() / out["measured_iter_s"] * 100
    out["signed_error_pct"] = (out["predicted_iter_s"] / out["measured_iter_s"] - 1) * 100
    out["predicted_throughput"] = joined["throughput_median_predicted"]
    out["measured_throughput"] = joined["throughput_median_measured"]
    out = out.sort_values(keys).reset_index(drop=True)
    out.attrs["median_ape_pct"] = float(out["ape_pct"].median()) if len(out) else math.nan
    return out


def format_validation(v: pd.DataFrame) -> str:
    """A Markdown table of the per-cell errors, the median APE last. Cells told apart by a PS scheme's
    local_reduce knob (validated per value of it: `knob_local_reduce`) show it; other rows show "-"."""
    net = "network" in v.columns
    lr = "knob_local_reduce" in v.columns and bool(v["knob_local_reduce"].notna().any())
    lines = [
        "| workload | method |"
        + (" local_reduce |" if lr else "")
        + " workers |"
        + (" network |" if net else "")
        + " predicted ms | measured ms | APE % | signed % |",
        "|---|---|" + ("---:|" if lr else "") + "---:|" + ("---|" if net else "") + "---:|---:|---:|---:|",
    ]
    for r in v.itertuples():
        knob = "" if not lr else f" {'-' if pd.isna(r.knob_local_reduce) else int(r.knob_local_reduce)} |"
        lines.append(
            f"| {r.workload} | {r.scheme} |{knob} {r.workers} |"
            + (f" {r.network} |" if net else "")
            + f" {r.predicted_iter_s * 1000:.1f} | {r.measured_iter_s * 1000:.1f} | {r.ape_pct:.1f} | "
            f"{r.signed_error_pct:+.1f} |"
        )
    lines.append(f"\nmedian APE over {len(v)} cells: {v.attrs.get('median_ape_pct', math.nan):.1f} %")
    return "\n".join(lines)
