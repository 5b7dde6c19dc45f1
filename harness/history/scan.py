"""The whole history searched: every series (one cell on one fingerprint) in run order, its changes found
(detect.py) and triaged (annotations.py), and every environment change of a cell shown as such.

    found = scan("history/")          # found.changes (a table), found.series (one row per series)

A series is ordered by its commits' first-parent depth (commits.py) and then by the runs' start times, or by
time alone when any of its runs' commits could not be placed. Only series with new runs are searched again:
the results of the others come from `.cache/series.json`, keyed by the series' length, its newest run and the
detector's settings. Samples are read only for the series in which PELT found a candidate.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from harness.core.atomic import write_json_atomic
from harness.history import annotations, store
from harness.history.commits import bisect_command
from harness.history.detect import Change, DetectorConfig, candidates, find_changes, stable_start
from harness.history.fingerprint import differences
from harness.history.null import VERSION, penalty_factor
from harness.history.rows import COLUMNS

CACHE = ".cache"
CHANGE_COLUMNS = [
    "state",
    "kind",
    "confirmed",
    "cell",
    "workload",
    "scheme",
    "series",
    "fingerprint",
    "size",
    "size_low",
    "size_high",
    "p_value",
    "runs_after",
    "last_good",
    "first_bad",
    "first_bad_run",
    "first_bad_utc",
    "bisect",
    "detail",
    "reason",
]
"""`state`: open, acknowledged, expected (annotations.py), or `environment` for a fingerprint change (kind
`environment`: a new series, never a regression)."""


@dataclass
class Scan:
    rows: pd.DataFrame
    """Every ok row (no samples), in series order (`position` is the index within its series)."""
    changes: pd.DataFrame
    """CHANGE_COLUMNS, open ones first."""
    series: pd.DataFrame
    """One row per series: series, cell, workload, fingerprint, runs, stable_from (its first position)."""
    problems: list[str]


def ordered(rows: pd.DataFrame) -> pd.DataFrame:
    """Rows in series order (module docstring), with `position` within each series."""
    placed = rows.groupby("series", observed=True)["commit_depth"].transform("min") >= 0
    rows = rows.assign(_order=np.where(placed, rows["commit_depth"], -1))
    rows = rows.sort_values(["series", "_order", "run_utc"], kind="stable").drop(columns="_order")
    return rows.assign(position=rows.groupby("series", observed=True).cumcount()).reset_index(drop=True)


def _signature(g: pd.DataFrame, cfg: DetectorConfig) -> str:
    return json.dumps([len(g), str(g["run_key"].iloc[-1]), dataclasses.astuple(cfg), VERSION])


def _search(history: Path, ok: pd.DataFrame, cfg: DetectorConfig) -> dict[str, list[Change]]:
    cache_dir = history / CACHE
    cache_file = cache_dir / "series.json"
    try:
        cached = json.loads(cache_file.read_text()) if cache_file.exists() else {}
    except ValueError:
        cached = {}
    found, need_samples, fresh = {}, {}, {}
    for sid, g in ok.groupby("series", sort=False, observed=True):
        sig = _signature(g, cfg)
        if sid in cached and cached[sid]["sig"] == sig:
            found[sid] = [Change(**c) for c in cached[sid]["changes"]]
            continue
        m = g["throughput_median"].to_numpy(float)
        k = penalty_factor(len(m), cfg.false_rate, cache_dir)
        fresh[sid] = sig
        if len(m) >= cfg.min_runs and candidates(m, k):
            need_samples[sid] = (m, k)
        else:
            found[sid] = []
    if need_samples:
        with_samples, _ = store.read(history, columns=["run_key", "cell_key", "samples"], series=set(need_samples))
        by_run = {(r.series, r.run_key): r.samples for r in with_samples.itertuples()}
        for sid, (m, k) in need_samples.items():
            keys = ok.loc[ok["series"] == sid, "run_key"]
            samples = [by_run.get((sid, rk)) for rk in keys]
            found[sid] = find_changes(m, samples, k, cfg)
    if fresh:
        cached.update(
            {sid: {"sig": sig, "changes": [dataclasses.asdict(c) for c in found[sid]]} for sid, sig in fresh.items()}
        )
        write_json_atomic(cache_file, cached)
    return found


def _change_row(g: pd.DataFrame, c: Change, notes) -> dict:
    bad, good = g.iloc[c.at], g.iloc[c.at - 1]
    state, reason = annotations.state_of(notes, bad["series"], bad["commit"], bad["run_key"])
    return {
        "state": state,
        "kind": "change",
        "confirmed": c.confirmed,
        "cell": bad["cell"],
        "workload": bad["workload"],
        "scheme": bad["scheme"],
        "series": bad["series"],
        "fingerprint": bad["fingerprint"],
        "size": c.size,
        "size_low": c.size_low,
        "size_high": c.size_high,
        "p_value": c.p_value,
        "runs_after": c.runs_after,
        "last_good": good["commit"],
        "first_bad": bad["commit"],
        "first_bad_run": bad["run_key"],
        "first_bad_utc": bad["run_utc"],
        "bisect": bisect_command(bad["commit"], good["commit"]),
        "detail": "" if bad["commit_reason"] == "" else bad["commit_reason"],
        "reason": reason,
    }


def environment_changes(rows: pd.DataFrame) -> list[dict]:
    """One row per cell whose fingerprint changed between two of its runs (in time order); vectorised, for a
    history of a million rows."""
    order = rows[["cell_key", "run_utc"]].sort_values(["cell_key", "run_utc"], kind="stable").index.to_numpy()
    key = pd.factorize(rows["cell_key"])[0][order]  # codes: a million strings compared as integers
    fid = pd.factorize(rows["fingerprint"])[0][order]
    changed = np.flatnonzero((key[1:] == key[:-1]) & (fid[1:] != fid[:-1])) + 1
    out = []
    for i in changed:
        r, p = rows.loc[order[i]], rows.loc[order[i - 1]]
        out.append(
            {
                "state": "environment",
                "kind": "environment",
                "confirmed": True,
                "cell": r["cell"],
                "workload": r["workload"],
                "scheme": r["scheme"],
                "series": r["series"],
                "fingerprint": r["fingerprint"],
                "last_good": p["commit"],
                "first_bad": r["commit"],
                "first_bad_run": r["run_key"],
                "first_bad_utc": r["run_utc"],
                "bisect": "",
                "detail": "new series: " + differences(p["fingerprint_fields"], r["fingerprint_fields"]),
                "reason": "",
            }
        )
    return out


def scan(history: str | Path, cfg: DetectorConfig = DetectorConfig()) -> Scan:
    """Search every series of a history folder (module docstring)."""
    history = Path(history)
    notes = annotations.load(history)
    rows, problems = store.read(history, columns=[c for c in COLUMNS if c != "samples"])
    ok = ordered(rows[(rows["status"] == "ok") & (rows["throughput_median"] > 0)])
    found = _search(history, ok, cfg)
    change_rows, series_rows = environment_changes(rows), []
    for sid, g in ok.groupby("series", sort=False, observed=True):
        changes = found.get(sid, [])
        made = [_change_row(g, c, notes) for c in changes]
        change_rows += made
        resets = [c.at for c, r in zip(changes, made) if r["state"] == "expected"]
        series_rows.append(
            {
                "series": sid,
                "cell": g["cell"].iloc[0],
                "cell_key": g["cell_key"].iloc[0],
                "workload": g["workload"].iloc[0],
                "fingerprint": g["fingerprint"].iloc[0],
                "runs": len(g),
                "stable_from": stable_start(changes, resets),
            }
        )
    table = pd.DataFrame(change_rows, columns=CHANGE_COLUMNS)
    rank = {"open": 0, "acknowledged": 1, "expected": 2, "environment": 3}
    table = table.sort_values(
        ["state", "confirmed", "first_bad_utc"],
        key=lambda s: s.map(rank) if s.name == "state" else s,
        ascending=[True, False, False],
        kind="stable",
    ).reset_index(drop=True)
    series = pd.DataFrame(
        series_rows, columns=["series", "cell", "cell_key", "workload", "fingerprint", "runs", "stable_from"]
    )
    return Scan(ok, table, series, problems)
