"""Shaping the tidy tables for the report (pure): merging runs, picking measured/predicted rows.

Several runs merge by concatenating their tables (typically one run per network). When two runs hold
the same cell on the same network label, the network label of each is suffixed with its run so the
figures show both instead of silently drawing one over the other.
"""

from __future__ import annotations

import pandas as pd

from harness.core.methods import SEVEN_METHODS
from harness.gate.keys import cell_key

PHASES = ("forward_s", "backward_s", "comm_wait_s", "optimizer_s")


def merge(tables: list, names: list[str] | None = None) -> tuple[dict[str, pd.DataFrame], list[str]]:
    """Concatenate the tables of several runs (objects with .summary .raw .environment .commbench).

    Returns ({"summary", "raw", "environment", "commbench"}, notes); every frame gains a `run` column."""
    names = list(names or [getattr(getattr(t, "path", None), "name", f"run{i}") for i, t in enumerate(tables)])
    for i, n in enumerate(names):  # two runs from different parents may share a directory name
        if names.count(n) > 1:
            names[i] = f"{n}#{i + 1}"
    out: dict[str, list] = {"summary": [], "raw": [], "environment": [], "commbench": []}
    for name, t in zip(names, tables):
        for k in out:
            df = getattr(t, k)
            if df is not None and not df.empty:
                out[k].append(df.assign(run=name))
    merged = {k: (pd.concat(v, ignore_index=True) if v else pd.DataFrame()) for k, v in out.items()}
    notes = []
    s = merged["summary"]
    if not s.empty and len(tables) > 1:
        s = s.copy()
        if "network" not in s:
            s["network"] = "unknown"
        s["network"] = s["network"].fillna("unknown").astype(str)
        keys = s.apply(lambda r: (cell_key(r), r.get("source", "measured")), axis=1)
        # the 1-worker `local` baseline is measured by every run of a study (e.g. at 2 and at 3 hosts):
        # the same cell twice there is expected and drawn at one point
        dup = keys.duplicated(keep=False) & (s["scheme"] != "local")
        dup_runs = s.loc[dup, "run"].unique()
        if len(dup_runs):
            hit = s["run"].isin(dup_runs)
            s.loc[hit, "network"] = s.loc[hit, "network"] + " [" + s.loc[hit, "run"].astype(str) + "]"
            notes.append(
                f"runs {', '.join(map(str, dup_runs))} hold the same cells on the same network "
                f"label; their network labels carry the run name so both are shown"
            )
        merged["summary"] = s
    return merged, notes


def measured(summary: pd.DataFrame) -> pd.DataFrame:
    if summary.empty or "source" not in summary:
        return summary
    return summary[summary["source"].fillna("measured") == "measured"]


def predicted(summary: pd.DataFrame) -> pd.DataFrame:
    if summary.empty or "source" not in summary:
        return summary.iloc[0:0]
    p = summary[summary["source"] == "predicted"]
    return p[p["throughput_median"].notna()] if "throughput_median" in p else p.iloc[0:0]


def ok(summary: pd.DataFrame) -> pd.DataFrame:
    return summary[summary["status"] == "ok"] if not summary.empty else summary


def failed(summary: pd.DataFrame) -> pd.DataFrame:
    return summary[summary["status"] != "ok"] if not summary.empty else summary


def networks(summary: pd.DataFrame) -> list[str]:
    if summary.empty or "network" not in summary:
        return []
    return sorted(summary["network"].fillna("unknown").astype(str).unique())


def schemes(summary: pd.DataFrame, include_local: bool = False) -> list[str]:
    """Scheme names in a stable order: the study's order where known, then the rest alphabetically."""
    order = ["local", "ddp", "horovod", "deepspeed", "byteps", *SEVEN_METHODS]
    have = set(summary["scheme"].dropna()) if not summary.empty else set()
    if not include_local:
        have.discard("local")
    return [s for s in order if s in have] + sorted(have - set(order))


def with_series(summary: pd.DataFrame) -> pd.DataFrame:
    """Adds `series`: the scheme (with /backend when not torch), plus the server count or the knobs only
    where one scheme has several of them at the same workload, network, source and worker count, so
    distinct series never share a name and a server count that grows with N does not split a line."""
    if summary.empty:
        return summary.assign(series=pd.Series(dtype=str))
    df = summary.copy()
    backend = df["backend"].fillna("torch") if "backend" in df else pd.Series("torch", index=df.index)
    df["series"] = [str(s) if b == "torch" else f"{s}/{b}" for s, b in zip(df["scheme"], backend)]
    group = [c for c in ("workload", "network", "source", "series", "workers") if c in df]
    for col, fmt in (
        ("dtype", lambda v: f" {v}" if pd.notna(v) else ""),
        ("servers", lambda v: f" S={int(v)}" if pd.notna(v) else ""),
        ("knobs_json", lambda v: f" {v}"),
    ):
        if col not in df:
            continue
        varies = df.groupby(group, dropna=False)[col].transform(lambda x: x.astype(str).nunique() > 1)
        if varies.any():  # split every row of the affected series, not only the ambiguous ones
            hit = df["series"].isin(df.loc[varies, "series"].unique())
            df.loc[hit, "series"] = df.loc[hit, "series"] + df.loc[hit, col].map(fmt)
    return df


def largest_workers(summary: pd.DataFrame) -> pd.DataFrame:
    """Per (workload, network), the rows at that pair's largest worker count among non-local cells."""
    s = summary[summary["scheme"] != "local"]
    if s.empty:
        return s
    s = s.assign(network=s["network"].fillna("unknown").astype(str))
    top = s.groupby(["workload", "network"])["workers"].transform("max")
    return s[s["workers"] == top]


def match_predicted(p: pd.DataFrame, m: pd.DataFrame, keys: list[str], cols: list[str]) -> pd.DataFrame:
    """The one predicted-vs-measured join: predicted rows `p` matched to measured rows `m` on `keys`
    (NaN keys, e.g. an image workload's seq_len, match each other); each of `cols` comes back twice,
    suffixed _predicted and _measured."""
    p = p[[c for c in dict.fromkeys(keys + cols) if c in p.columns]].copy()
    m = m[[c for c in dict.fromkeys(keys + cols) if c in m.columns]].copy()
    for df in (p, m):
        for k in keys:
            if df[k].dtype.kind == "f":
                df[k] = df[k].fillna(-1)
    j = p.merge(m, on=keys, suffixes=("_predicted", "_measured"))
    for k in keys:
        if j[k].dtype.kind == "f":
            j[k] = j[k].replace(-1, float("nan"))
    return j
