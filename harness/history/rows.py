"""A run directory as history rows: one per measured cell, keyed by the gate's cell identity
(harness/gate/keys.py), with the cell's environment fingerprint (fingerprint.py), the run's commit
(commits.py), its time and load, the cell's median throughput with its 95% CI and the precision its stop
rule reached, status, and the per-iteration throughputs of the slowest rank (the samples the gate tests).

    rows = run_rows(load_run("results/<run-id>"), repo=".")
"""

from __future__ import annotations

import datetime
import hashlib
import json
import math

import numpy as np
import pandas as pd

from harness.gate.compare import iteration_throughputs, measured_cells
from harness.gate.keys import MATCH_KEYS, cell_key, cell_label
from harness.history.commits import locate
from harness.history.fingerprint import cell_fingerprint
from harness.results.machine_load import busy_reason

SCHEMA_VERSION = 1
"""Of the history rows (a newer store is refused with a one-line error, an older one read as it is)."""
COLUMNS = {
    "schema_version": "int64",
    "series": "str",
    "cell_key": "str",
    "cell": "str",
    "workload": "str",
    "scheme": "str",
    "backend": "str",
    "workers": "int64",
    "sample_unit": "str",
    "global_batch": "float64",
    "fingerprint": "str",
    "fingerprint_fields": "str",
    "run_key": "str",
    "run_id": "str",
    "run_utc": "str",
    "added_utc": "str",
    "cell_id": "str",
    "commit": "str",
    "commit_dirty": "bool",
    "commit_depth": "int64",
    "commit_reason": "str",
    "status": "str",
    "reason": "str",
    "load": "str",
    "throughput_median": "float64",
    "throughput_ci95_low": "float64",
    "throughput_ci95_high": "float64",
    "precision_reached": "float64",
    "samples": "object",
}
"""One row per cell and run. `series` hashes the cell and the fingerprint (a new machine is a new series);
`run_key` names the run wherever its tables were copied (run id and start time); `samples` holds the
per-iteration throughputs of the slowest rank (empty for a failed cell); `load` is what busied the machine
("" when quiet: harness/results/machine_load.busy_reason); `precision_reached` is the relative half-width of
the 95% CI of the run's median iteration time that its stop rule reached (README, "Measuring"), NaN for a fixed
cell, a run from before the stop rule, or a store written before the column (read as NaN)."""
REQUIRED = ("schema_version", "series", "cell_key", "fingerprint", "run_key", "throughput_median")
"""Columns without which a file is not a history file (it is named and skipped)."""


def series_id(key_json: str, fingerprint: str) -> str:
    return hashlib.sha1(f"{key_json}|{fingerprint}".encode()).hexdigest()[:12]


def _env_row(environment: pd.DataFrame, run_id) -> dict:
    if environment is None or environment.empty:
        return {}
    same = environment[environment["run_id"] == run_id] if "run_id" in environment else environment
    return (same if len(same) else environment).iloc[0].to_dict()


def _number(v) -> float:
    try:
        v = float(v)
    except (TypeError, ValueError):
        return math.nan
    return v


def run_rows(tables, repo=".", now: str | None = None) -> pd.DataFrame:
    """The history rows of one loaded run (harness/results/store.load_run)."""
    summary = measured_cells(tables.summary)
    samples = iteration_throughputs(summary, tables.raw)
    now = now or datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    commits: dict = {}
    rows = []
    for _, r in summary.iterrows():
        env = _env_row(tables.environment, r.get("run_id"))
        recorded = str(env.get("git_commit") or "")
        where = commits.setdefault(recorded, locate(recorded, repo))
        fid, fields = cell_fingerprint(env, r)
        key = json.dumps(cell_key(r))
        x = samples.get(r["cell_id"], np.array([])) if r.get("status") == "ok" else np.array([])
        run_utc = str(env.get("created_utc") or "")
        rows.append(
            {
                "schema_version": SCHEMA_VERSION,
                "series": series_id(key, fid),
                "cell_key": key,
                "cell": cell_label(r),
                "workload": str(r.get("workload")),
                "scheme": str(r.get("scheme")),
                "backend": str(r.get("backend") or ""),
                "workers": int(r.get("workers") or 0),
                "sample_unit": str(r.get("sample_unit") or ""),
                "global_batch": _number(r.get("global_batch")),
                "fingerprint": fid,
                "fingerprint_fields": fields,
                "run_key": f"{r.get('run_id') or env.get('run_id') or tables.path.name}@{run_utc}",
                "run_id": str(r.get("run_id") or env.get("run_id") or tables.path.name),
                "run_utc": run_utc,
                "added_utc": now,
                "cell_id": str(r["cell_id"]),
                "commit": where.sha,
                "commit_dirty": where.dirty,
                "commit_depth": where.depth,
                "commit_reason": where.reason,
                "status": str(r.get("status")),
                "reason": str(r.get("reason") or ""),
                "load": busy_reason(env) if env else "",
                "throughput_median": float(np.median(x)) if len(x) else _number(r.get("throughput_median")),
                "throughput_ci95_low": _number(r.get("throughput_ci95_low")),
                "throughput_ci95_high": _number(r.get("throughput_ci95_high")),
                "precision_reached": _number(r.get("precision_reached")),
                "samples": np.asarray(x, dtype=float),
            }
        )
    return as_rows(pd.DataFrame(rows))


def as_rows(df: pd.DataFrame) -> pd.DataFrame:
    """The history columns in order, with their types (an empty table keeps them)."""
    out = pd.DataFrame(
        {c: df[c] if c in df else pd.Series(dtype=t if t != "str" else object) for c, t in COLUMNS.items()}
    )
    for c, t in COLUMNS.items():
        if t in ("int64", "float64", "bool"):
            out[c] = out[c].astype(t)
    return out


def raw_key(key_json: str) -> dict:
    """The cell's axis values (MATCH_KEYS) back from its stored key."""
    return dict(zip(MATCH_KEYS, json.loads(key_json)))
