"""The regression gate's statistics and decisions (pure: DataFrames in, DataFrames out; no I/O).

    from harness.compare import compare_runs, to_markdown
    table = compare_runs(base.summary, base.raw, cur.summary, cur.raw, factor=1.10)

The rule is asv's (asv's `_stats.is_different` and `compare --factor`): a cell
changes only if the ratio of medians is beyond `factor` **and** the difference is significant:
Mann-Whitney U (two-sided) on the per-iteration throughputs of the slowest rank when both sides have
at least `min_samples` (6) iterations, else non-overlapping 99% confidence intervals of the mean.
A ratio within the factor is `same` however significant; a significant-looking ratio from noise is
`same` too. Throughput is higher-is-better, so `worse` means current < baseline / factor.

Cells are matched by their axis values (MATCH_KEYS), not by cell-id strings, so a cell id that changes
with an irrelevant field (e.g. the run's timeout) still finds its baseline.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats as st

from harness.errors import UserError

MATCH_KEYS = ("workload", "scheme", "backend", "workers", "servers", "batch_per_worker", "seq_len",
              "knobs_json", "network", "dtype", "server_hosts")
KEY_DEFAULTS = {"dtype": "fp32", "server_hosts": None}
"""What a run recorded before a key existed means: every earlier run was fp32, and placed its servers by
the rule `auto` now names (an empty value: a cell without servers). `auto` is what a cell that failed
before its placement was decided records; `_pair_placement` matches it to the placed cell."""

STATUSES = ("worse", "failed", "improved", "same", "new", "incomparable")
"""Every status a compared cell can get; `worse` and `failed` fail the gate (exit status 1)."""
FAILING = ("worse", "failed")


@dataclass(frozen=True)
class GateConfig:
    factor: float = 1.10
    """A change must exceed this ratio of medians (1.10 = 10%) to count (asv's --factor)."""
    alpha: float = 0.05
    """Significance level of the Mann-Whitney U test (two-sided)."""
    min_samples: int = 6
    """Fewest per-iteration samples per side for Mann-Whitney U; below it, non-overlapping CIs decide."""
    ci_level: float = 0.99
    """Confidence level of the CI-of-the-mean fallback."""


def _norm(v):
    """A hashable, type-stable form of one axis value: NaN/None -> None, 8.0 -> 8, knob JSON canonical
    (sorted keys, null-valued knobs dropped)."""
    if v is None or (isinstance(v, float) and math.isnan(v)) or v is pd.NA:
        return None
    if isinstance(v, (np.integer,)):
        return int(v)
    if isinstance(v, (float, np.floating)):
        return int(v) if float(v).is_integer() else float(v)
    if isinstance(v, str) and v.startswith("{"):
        try:  # a knob that is unset (null) is the same cell as one without the knob (a knob added later)
            return json.dumps({k: x for k, x in json.loads(v).items() if x is not None}, sort_keys=True)
        except ValueError:
            return v
    return v


def cell_key(row) -> tuple:
    """The identity of a cell across runs: its axis values (MATCH_KEYS), normalised."""
    key = []
    for k in MATCH_KEYS:
        v = _norm(row.get(k))
        key.append(KEY_DEFAULTS.get(k) if (v is None or v in ("", "auto")) and k in KEY_DEFAULTS else v)
    return tuple(key)


def cell_label(row, with_knobs: bool = True) -> str:
    """A short human label: workload scheme/backend N=.. S=.. knob=value @network."""
    parts = [f"{row.get('workload')} {row.get('scheme')}"]
    if row.get("backend") not in (None, "torch"):
        parts[0] += f"/{row.get('backend')}"
    parts.append(f"N={_norm(row.get('workers'))}")
    if _norm(row.get("servers")):
        parts.append(f"S={_norm(row.get('servers'))}")
    knobs = _norm(row.get("knobs_json"))
    if with_knobs and knobs and knobs != "{}":
        try:
            parts.append(",".join(f"{k}={v}" for k, v in json.loads(knobs).items()))
        except ValueError:
            parts.append(knobs)
    if row.get("network") not in (None, "loopback"):
        parts.append(f"@{row.get('network')}")
    return " ".join(parts)


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


def ci_of_mean(x, level: float = 0.99) -> tuple[float, float]:
    """Student-t confidence interval of the mean: mean -/+ t_{(1+level)/2, n-1} s / sqrt(n)."""
    a = np.asarray(x, dtype=float)
    n = a.size
    if n < 2:
        return (math.nan, math.nan)
    half = float(st.t.ppf((1 + level) / 2, n - 1) * a.std(ddof=1) / math.sqrt(n))
    m = float(a.mean())
    return (m - half, m + half)


def significance(a, b, cfg: GateConfig = GateConfig()) -> tuple[bool | None, float, str]:
    """Is the difference between samples a and b significant?  -> (significant, p-value, test).

    significant is None when there are too few samples for either test (fewer than 2 on a side)."""
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    if min(a.size, b.size) >= cfg.min_samples:
        if np.ptp(np.concatenate([a, b])) == 0:  # all values equal: nothing differs
            return False, 1.0, "mann-whitney"
        p = float(st.mannwhitneyu(a, b, alternative="two-sided").pvalue)
        return (p < cfg.alpha), p, "mann-whitney"
    if min(a.size, b.size) < 2:
        return None, math.nan, "none"
    lo_a, hi_a = ci_of_mean(a, cfg.ci_level)
    lo_b, hi_b = ci_of_mean(b, cfg.ci_level)
    return (hi_a < lo_b or hi_b < lo_a), math.nan, f"ci{int(round(cfg.ci_level * 100))}"


def decide(base, cur, cfg: GateConfig = GateConfig()) -> dict:
    """One cell's verdict from the two per-iteration throughput samples (higher is better)."""
    base = np.asarray(base, dtype=float)
    cur = np.asarray(cur, dtype=float)
    out = {"baseline_x": float(np.median(base)) if base.size else math.nan,
           "current_x": float(np.median(cur)) if cur.size else math.nan,
           "n_baseline": int(base.size), "n_current": int(cur.size)}
    out["ratio"] = out["current_x"] / out["baseline_x"] if out["baseline_x"] else math.nan
    sig, p, test = significance(base, cur, cfg)
    out.update(p_value=p, test=test)
    if sig is None:
        return {**out, "status": "incomparable", "note": "fewer than 2 samples on a side"}
    beyond_down = out["ratio"] < 1 / cfg.factor
    beyond_up = out["ratio"] > cfg.factor
    if sig and beyond_down:
        return {**out, "status": "worse", "note": ""}
    if sig and beyond_up:
        return {**out, "status": "improved", "note": ""}
    note = "not significant" if (beyond_down or beyond_up) else ""
    return {**out, "status": "same", "note": note}


RESULT_COLUMNS = ["cell", "scheme", "status", "baseline_x", "current_x", "ratio", "p_value", "test",
                  "n_baseline", "n_current", "note", "sample_unit", "baseline_cell_id", "current_cell_id"]


def _measured(summary: pd.DataFrame) -> pd.DataFrame:
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
            raise UserError(f"the {side} holds two cells with the same axis values ({cell_label(r)}): "
                            f"compare one run against one run, not merged runs")
        rows[k] = r
    return rows


def _pair_placement(idx: dict, other: dict) -> dict:
    """Keys of `idx` whose server placement is unknown (the cell failed before it was placed) take the
    placement of the one cell of `other` that matches them in every other axis."""
    where = MATCH_KEYS.index("server_hosts")
    out = {}
    for key, row in idx.items():
        if key[where] is None and key not in other:
            twins = [k for k in other if k[:where] + k[where + 1:] == key[:where] + key[where + 1:]]
            if len(twins) == 1 and twins[0] not in idx:
                key = twins[0]
        out[key] = row
    return out


def compare_runs(base_summary: pd.DataFrame, base_raw: pd.DataFrame, cur_summary: pd.DataFrame,
                 cur_raw: pd.DataFrame, cfg: GateConfig = GateConfig()) -> pd.DataFrame:
    """One row per cell of either run: status, medians, ratio (current / baseline), p-value."""
    base_s, cur_s = _measured(base_summary), _measured(cur_summary)
    base_idx, cur_idx = _index(base_s, "baseline"), _index(cur_s, "current run")
    cur_idx = _pair_placement(cur_idx, base_idx)
    base_idx = _pair_placement(base_idx, cur_idx)
    base_x = iteration_throughputs(base_s, base_raw)
    cur_x = iteration_throughputs(cur_s, cur_raw)
    rows = []
    for key in list(cur_idx) + [k for k in base_idx if k not in cur_idx]:
        c, b = cur_idx.get(key), base_idx.get(key)
        ref = c if c is not None else b
        row = {"cell": cell_label(ref, with_knobs=False), "_full": cell_label(ref), "scheme": ref.get("scheme"),
               "sample_unit": ref.get("sample_unit", ""),
               "baseline_cell_id": b["cell_id"] if b is not None else "",
               "current_cell_id": c["cell_id"] if c is not None else "",
               "baseline_x": math.nan, "current_x": math.nan, "ratio": math.nan, "p_value": math.nan,
               "test": "", "n_baseline": 0, "n_current": 0, "note": ""}
        if b is not None and b["status"] == "ok":
            row["baseline_x"] = float(np.median(base_x[b["cell_id"]])) if b["cell_id"] in base_x else math.nan
        if c is not None and c["status"] == "ok":
            row["current_x"] = float(np.median(cur_x[c["cell_id"]])) if c["cell_id"] in cur_x else math.nan
        if c is None:
            row.update(status="incomparable", note="not in the current run")
        elif c["status"] != "ok":
            row.update(status="failed", note=str(c.get("reason") or "")[:200])
        elif b is None:
            row.update(status="new", note="not in the baseline")
        elif b["status"] != "ok":
            row.update(status="incomparable", note="failed in the baseline")
        elif b["cell_id"] not in base_x or c["cell_id"] not in cur_x:
            side = "baseline" if b["cell_id"] not in base_x else "current run"
            row.update(status="incomparable", note=f"no per-iteration samples in the {side}")
        else:
            row.update(decide(base_x[b["cell_id"]], cur_x[c["cell_id"]], cfg))
        rows.append(row)
    # knob values only where needed to tell cells apart (default knobs would drown the table)
    short = [r["cell"] for r in rows]
    for r in rows:
        if short.count(r["cell"]) > 1:
            r["cell"] = r["_full"]
    order = {s: i for i, s in enumerate(STATUSES)}
    df = pd.DataFrame(rows, columns=RESULT_COLUMNS)
    return df.sort_values("status", key=lambda s: s.map(order), kind="stable").reset_index(drop=True)


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
    base_s, cur_s = _measured(base_summary), _measured(cur_summary)
    keys = {cell_key(r) for _, r in base_s.iterrows()}
    return {str(r.get("backend")) for _, r in cur_s.iterrows() if cell_key(r) in keys and r.get("backend")}


def _fmt(v, spec: str) -> str:
    return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else format(v, spec)


def to_markdown(table: pd.DataFrame, cfg: GateConfig = GateConfig(), title: str = "") -> str:
    """The gate's verdict as a Markdown table (GitHub job-summary ready)."""
    units = sorted({u for u in table.get("sample_unit", pd.Series(dtype=str)).dropna() if u})
    unit = "/".join(units) or "samples"
    counts = table["status"].value_counts()
    head = ", ".join(f"{counts[s]} {s}" for s in STATUSES if s in counts) or "no cells"
    verdict = "FAIL" if gate_exit_code(table) else "pass"
    if nothing_compared(table):
        verdict = "FAIL: nothing compared (no cell of the current run matches a measured baseline cell)"
    lines = [f"### {title or 'ddlbench compare'}: {verdict} ({head})", "",
             f"X = median throughput ({unit}/s) over iterations, slowest rank per iteration; "
             f"ratio = current / baseline; a change counts beyond x{cfg.factor:g} and if significant "
             f"(Mann-Whitney U p < {cfg.alpha:g} with >= {cfg.min_samples} samples per side, "
             f"else non-overlapping {cfg.ci_level:.0%} CIs of the mean).", "",
             "| cell | baseline X | current X | ratio | p-value | status | note |",
             "|---|---:|---:|---:|---:|---|---|"]
    local = table[(table["scheme"] == "local") & table["status"].isin(["worse", "improved"])]
    if len(local):
        lines[2:2] = [f"Note: the 1-worker `local` cell (no communication) also changed "
                      f"({', '.join(local['status'])}): the machine itself was likely faster or slower "
                      f"(contention, clocks), not only the code under test.", ""]
    for _, r in table.iterrows():
        p = _fmt(r["p_value"], ".3g") if r["test"] == "mann-whitney" else (r["test"] or "-")
        note = str(r["note"]).replace("|", "\\|").replace("\n", " ")
        lines.append(f"| {r['cell']} | {_fmt(r['baseline_x'], '.1f')} | {_fmt(r['current_x'], '.1f')} | "
                     f"{_fmt(r['ratio'], '.3f')} | {p} | {r['status']} | {note} |")
    return "\n".join(lines) + "\n"
