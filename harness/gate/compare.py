"""The regression gate's cell matching and decisions (pure: DataFrames in, DataFrames out; no I/O).

    from harness.gate.compare import compare_runs, compare_rounds
    table = compare_runs(base.summary, base.raw, cur.summary, cur.raw, cfg)
    table = compare_rounds([(b.summary, b.raw) for b in base_rounds], [(c.summary, c.raw) for c in cur], cfg)

A cell changes only if the ratio of its throughputs is beyond `factor` **and** the difference is
significant (asv's rule, asv's `_stats.is_different` and `compare --factor`). What "significant" tests
depends on how many runs (rounds) of the same sweep each side holds (docs/ARCHITECTURE.md, "Regression
gate"; the tests are in harness/gate/stats.py, the Markdown in harness/gate/markdown.py):

- **Rounds** (at least 3 runs over both sides, e.g. a baseline of 3 and one fresh run): the unit of
  replication is a run. Each run gives one number per cell, the median over its iterations of the
  slowest rank's throughput; the test is a moderated t on the logs of those run medians (each cell's
  variance shrunk toward the machine's, fitted over all compared cells), each cell at alpha / cells.
  Iterations of one run share its start-up, placement and neighbours, so they are not independent draws
  of what the next run will do; on a shared 2-core box runs of the same sweep differ by far more than one
  run's iterations suggest. X is the geometric mean of the run medians, the ratio X_current /
  X_baseline. Each row also says the smallest drop the gate could have called (`detects`).
- **One run a side**: Mann-Whitney U (two-sided) on the per-iteration throughputs of the slowest rank
  when both sides have at least `min_samples` (6) iterations; else, where both rows carry the precision
  their stop rule reached (`precision_reached`, README "Measuring"), non-overlapping 95% confidence
  intervals of the medians from it; else non-overlapping 99% confidence intervals of the mean. The table
  says the run-to-run spread was not known.

Each row's `uncertainty` says in words which uncertainty its verdict used (and, where both rows carry
`precision_reached`, their medians' CIs).

A ratio within the factor is `same` however significant; a significant-looking ratio from noise is
`same` too. Throughput is higher-is-better, so `worse` means current < baseline / factor.

Cells are matched by their axis values (MATCH_KEYS), not by cell-id strings, so a cell id that changes
with an irrelevant field (e.g. the run's timeout) still finds its baseline.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from harness.core.errors import UserError
from harness.gate.keys import MATCH_KEYS, cell_key, cell_label, pair_resolved
from harness.gate.stats import (
    DEFAULT_GATE,
    GateConfig,
    ci_of_mean,
    decide,
    decide_rounds,
    log_spread,
    machine_prior,
    significance,
)
from harness.results.summarize import row_host_heap, short_of_precision

__all__ = [
    "DEFAULT_GATE",
    "HEAP_CHANGED",
    "GateConfig",
    "ci_of_mean",
    "compare_rounds",
    "compare_runs",
    "compared_backends",
    "decide",
    "decide_rounds",
    "gate_exit_code",
    "iteration_throughputs",
    "measured_cells",
    "significance",
]

STATUSES = ("worse", "failed", "improved", "same", "new", "incomparable")
"""Every status a compared cell can get; `worse` and `failed` fail the gate (exit status 1)."""
FAILING = ("worse", "failed")


def iteration_throughputs(summary: pd.DataFrame, raw: pd.DataFrame) -> dict[str, np.ndarray]:
    """cell_id -> per-iteration throughput of the slowest rank (global_batch / max over ranks of iter_s)."""
    if raw is None or raw.empty or summary is None or summary.empty:
        return {}
    slowest = raw.groupby(["cell_id", "iteration"], sort=True)["iter_s"].max()
    batch = summary.drop_duplicates("cell_id").set_index("cell_id")["global_batch"]
    out = {}
    for cell_id, t in slowest.groupby(level="cell_id"):
        if cell_id not in batch.index:
            continue
        t = t.to_numpy(dtype=float)
        t = t[np.isfinite(t) & (t > 0)]
        out[cell_id] = float(batch[cell_id]) / t
    return out


RESULT_COLUMNS = [
    "cell",
    "scheme",
    "status",
    "baseline_x",
    "current_x",
    "ratio",
    "detects",
    "p_value",
    "test",
    "n_baseline",
    "n_current",
    "runs_baseline",
    "runs_current",
    "spread",
    "note",
    "uncertainty",
    "sample_unit",
    "baseline_cell_id",
    "current_cell_id",
]
"""`detects`: the ratio below which this cell would have been called worse (rounds only); `spread`: the
standard deviation of log run medians, pooled over both sides (about the run-to-run CV); `runs_*`: how
many runs of each side measured the cell; `uncertainty`: which uncertainty the verdict used, in words."""


def measured_cells(summary: pd.DataFrame) -> pd.DataFrame:
    """The measured rows of a summary (not the predictor's `source=predicted` rows); an empty table with
    the key columns when there is none."""
    if summary is None or summary.empty:
        return pd.DataFrame(columns=["cell_id", "status", *MATCH_KEYS])
    if "source" in summary:
        summary = summary[summary["source"].fillna("measured") == "measured"]
    return summary


def _index(summary: pd.DataFrame, side: str) -> dict[tuple, pd.Series]:
    rows: dict[tuple, pd.Series] = {}
    for _, r in summary.iterrows():
        k = cell_key(r)
        if k in rows:
            raise UserError(
                f"the {side} holds two cells with the same axis values ({cell_label(r)}): "
                f"compare one run against one run, not merged runs"
            )
        rows[k] = r
    return rows


Rounds = list  # [(summary, raw), ...]: runs of one sweep, one side of a comparison


def _side(rounds: Rounds, side: str) -> list[tuple[dict, dict]]:
    """Per run: (key -> summary row, cell_id -> per-iteration throughputs)."""
    out = []
    for k, (summary, raw) in enumerate(rounds):
        s = measured_cells(summary)
        name = side if len(rounds) == 1 else f"{side} (run {k + 1})"
        out.append((_index(s, name), iteration_throughputs(s, raw)))
    return out


def _union(side: list[tuple[dict, dict]]) -> dict:
    keys: dict = {}
    for idx, _ in side:
        for k, r in idx.items():
            keys.setdefault(k, r)
    return keys


def compare_runs(
    base_summary: pd.DataFrame,
    base_raw: pd.DataFrame,
    cur_summary: pd.DataFrame,
    cur_raw: pd.DataFrame,
    cfg: GateConfig = DEFAULT_GATE,
) -> pd.DataFrame:
    """One run against one run: one row per cell of either run (status, medians, ratio, p-value)."""
    return compare_rounds([(base_summary, base_raw)], [(cur_summary, cur_raw)], cfg)


def compare_rounds(base: Rounds, cur: Rounds, cfg: GateConfig = DEFAULT_GATE) -> pd.DataFrame:
    """Runs of one sweep against runs of it: one row per cell of either side. With 3 or more runs over
    both sides the runs' medians decide (decide_rounds: each cell's run-to-run spread shrunk toward the
    machine's, fitted over the compared cells), with one a side the iterations (decide)."""
    if not base or not cur:
        raise UserError("a comparison needs at least one run on each side")
    b_side, c_side = _side(base, "baseline"), _side(cur, "current run")
    b_union = _union(b_side)
    c_side = [(pair_resolved(idx, b_union), x) for idx, x in c_side]
    c_union = _union(c_side)
    b_side = [(pair_resolved(idx, c_union), x) for idx, x in b_side]
    b_union = _union(b_side)
    rounds = len(base) + len(cur) >= 3
    rows = [
        _compare_cell(key, b_side, c_side, cfg, rounds)
        for key in list(c_union) + [k for k in b_union if k not in c_union]
    ]
    judged = [r for r in rows if "_rounds" in r]
    prior = machine_prior([log_spread(*r["_rounds"]) for r in judged])
    for r in judged:
        r.update(decide_rounds(*r.pop("_rounds"), cfg, prior=prior, cells=len(judged)))
    # knob values only where needed to tell cells apart (default knobs would drown the table)
    short = [r["cell"] for r in rows]
    for r in rows:
        if short.count(r["cell"]) > 1:
            r["cell"] = r["_full"]
    order = {s: i for i, s in enumerate(STATUSES)}
    df = pd.DataFrame(rows, columns=RESULT_COLUMNS)
    df = df.sort_values("status", key=lambda s: s.map(order), kind="stable").reset_index(drop=True)
    df.attrs["machine_spread"] = math.sqrt(prior[0]) if judged and prior[0] > 0 else math.nan
    df.attrs["machine_df"] = prior[1] if judged else math.nan
    df.attrs["short_of_precision"] = [
        line for summary, _ in cur for line in short_of_precision(measured_cells(summary))
    ]
    return df


def _samples(side: list[tuple[dict, dict]], key) -> tuple[list, list, list]:
    """(rows present, rows failed, per-iteration samples of the ok runs that have them)."""
    present = [(idx[key], x) for idx, x in side if key in idx]
    failed = [r for r, _ in present if r["status"] != "ok"]
    samples = [
        x[r["cell_id"]] for r, x in present if r["status"] == "ok" and r["cell_id"] in x and len(x[r["cell_id"]])
    ]
    return [r for r, _ in present], failed, samples


HEAP_CHANGED = "host heap"
"""How the note of a cell incomparable because its host heap changed begins (the verdict line reads it)."""


def _compare_cell(key, b_side, c_side, cfg: GateConfig, rounds: bool) -> dict:  # noqa: C901 - one return per verdict
    b_rows, b_failed, b_x = _samples(b_side, key)
    c_rows, c_failed, c_x = _samples(c_side, key)
    ref = c_rows[0] if c_rows else b_rows[0]
    row = {
        "cell": cell_label(ref, with_knobs=False),
        "_full": cell_label(ref),
        "scheme": ref.get("scheme"),
        "sample_unit": ref.get("sample_unit", ""),
        "baseline_cell_id": b_rows[0]["cell_id"] if b_rows else "",
        "current_cell_id": c_rows[0]["cell_id"] if c_rows else "",
        "baseline_x": math.nan,
        "current_x": math.nan,
        "ratio": math.nan,
        "detects": math.nan,
        "p_value": math.nan,
        "test": "",
        "n_baseline": sum(map(len, b_x)),
        "n_current": sum(map(len, c_x)),
        "runs_baseline": len(b_x),
        "runs_current": len(c_x),
        "spread": math.nan,
        "note": "",
        "uncertainty": "",
    }
    b_med = [float(np.median(x)) for x in b_x]
    c_med = [float(np.median(x)) for x in c_x]
    if b_med:
        row["baseline_x"] = float(np.exp(np.mean(np.log(b_med))))
    if c_med:
        row["current_x"] = float(np.exp(np.mean(np.log(c_med))))
    of = lambda n, rows: f" (in {n} of {len(rows)} runs)" if len(rows) > 1 else ""
    if not c_rows:
        return {**row, "status": "incomparable", "note": "not in the current run"}
    if c_failed:
        return {
            **row,
            "status": "failed",
            "note": (str(c_failed[0].get("reason") or "") + of(len(c_failed), c_rows))[:200],
        }
    if not b_rows:
        return {**row, "status": "new", "note": "not in the baseline"}
    if len(b_failed) == len(b_rows):
        return {**row, "status": "incomparable", "note": "failed in the baseline"}
    if not b_x or not c_x:
        side = "baseline" if not b_x else "current run"
        return {**row, "status": "incomparable", "note": f"no per-iteration samples in the {side}"}
    heaps = [sorted({row_host_heap(r) for r in rows}) for rows in (b_rows, c_rows)]
    if heaps[0] != heaps[1]:  # a CPU cell's page faults are a third of its time with glibc's defaults
        return {
            **row,
            "status": "incomparable",
            "note": f"{HEAP_CHANGED} {'/'.join(heaps[0])} -> {'/'.join(heaps[1])} (harness/measure/host_heap.py): "
            f"record the baseline again",
        }
    if rounds:
        row["_rounds"] = (b_med, c_med)  # decided in compare_rounds, with the machine's spread
    else:
        row.update(decide(b_x[0], c_x[0], cfg, reached=(_reached(b_rows), _reached(c_rows))))
    if b_failed:
        row["note"] = "; ".join(n for n in (row["note"], f"failed in {len(b_failed)} baseline runs") if n)
    return row


def _reached(rows: list) -> float:
    """The precision_reached of a side's one ok row (the run the samples are from); NaN where its summary
    has none (a fixed cell, or a run from before the stop rule)."""
    ok = [r for r in rows if r["status"] == "ok"]
    v = ok[0].get("precision_reached") if ok else None
    try:
        return math.nan if v is None else float(v)
    except (TypeError, ValueError):
        return math.nan


VERDICTS = ("worse", "failed", "improved", "same")  # a cell was judged; with none, nothing was compared


def nothing_compared(table: pd.DataFrame) -> bool:
    """True when no cell got a verdict (e.g. two unrelated runs: all new or incomparable)."""
    return not (len(table) and table["status"].isin(VERDICTS).any())


def gate_exit_code(table: pd.DataFrame) -> int:
    """1 when any cell is worse or failed, or when nothing was compared (a gate that judged nothing
    must not pass); else 0."""
    return int(nothing_compared(table) or bool(table["status"].isin(FAILING).any()))


def compared_backends(base_summary: pd.DataFrame, cur_summary: pd.DataFrame) -> set[str]:
    """Backends of the cells present in both runs: only their libraries can change what is judged."""
    base_s, cur_s = measured_cells(base_summary), measured_cells(cur_summary)
    keys = {cell_key(r) for _, r in base_s.iterrows()}
    return {str(r.get("backend")) for _, r in cur_s.iterrows() if cell_key(r) in keys and r.get("backend")}
