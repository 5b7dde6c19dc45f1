"""The regression gate's verdict as Markdown (GitHub job-summary ready); harness/gate/compare.py decides.

print(to_markdown(compare_rounds(base, cur, cfg), cfg, title="ddlbench compare cpu-tiny -> today"))
"""

from __future__ import annotations

import math

import pandas as pd

from harness.gate.compare import (
    DEFAULT_GATE,
    HEAP_CHANGED,
    STATUSES,
    GateConfig,
    gate_exit_code,
    nothing_compared,
)


def _fmt(v, spec: str) -> str:
    return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else format(v, spec)


def _verdict(table: pd.DataFrame) -> str:
    """pass, FAIL, or FAIL with why nothing was compared."""
    if not nothing_compared(table):
        return "FAIL" if gate_exit_code(table) else "pass"
    notes = table.get("note", pd.Series(dtype=str)).fillna("")
    if len(table) and notes.str.startswith(HEAP_CHANGED).all():
        return "FAIL: nothing compared (every cell's host heap changed since the baseline: record the baseline again)"
    return "FAIL: nothing compared (no cell of the current run matches a measured baseline cell)"


def _uncertainty_line(table: pd.DataFrame, named: int = 4) -> str:
    """Which uncertainty the verdicts used (the table's `uncertainty`), each with its cells (up to `named` by
    name, else how many); "" when no cell was judged."""
    if "uncertainty" not in table:
        return ""
    judged = table[table["uncertainty"].fillna("") != ""]
    parts = []
    for used, g in judged.groupby("uncertainty", sort=False):
        cells = ", ".join(g["cell"]) if len(g) <= named else f"{len(g)} cells"
        parts.append(f"{used}: {cells}")
    return f"Uncertainty each verdict used: {'; '.join(parts)}." if parts else ""


def to_markdown(table: pd.DataFrame, cfg: GateConfig = DEFAULT_GATE, title: str = "") -> str:
    """The gate's verdict as a Markdown table (GitHub job-summary ready)."""
    units = sorted({u for u in table.get("sample_unit", pd.Series(dtype=str)).dropna() if u})
    unit = "/".join(units) or "samples"
    counts = table["status"].value_counts()
    head = ", ".join(f"{counts[s]} {s}" for s in STATUSES if s in counts) or "no cells"
    verdict = _verdict(table)
    tests = table.get("test", pd.Series(dtype=str)).fillna("")
    by_runs = tests.str.startswith("t ").any()
    by_iters = tests.isin(["mann-whitney", "median-ci95"]).any() or tests.str.startswith("ci").any()
    rule = []
    if by_runs:
        rule.append(
            f"Over several runs of the sweep: X = geometric mean over runs of each run's median "
            f"throughput ({unit}/s, slowest rank per iteration); a cell is worse or improved when the "
            f"ratio is beyond x{cfg.factor:g} and a moderated t on the log run medians gives p < "
            f"{cfg.alpha:g}, the p-value multiplied by the number of cells judged (Bonferroni: at most "
            f"a {cfg.alpha:g} chance that an unchanged sweep fails the gate). Each cell's run-to-run "
            f"spread is its own shrunk toward the machine's (empirical Bayes over all cells); "
            f"`detects` is the ratio below which the cell would have been called worse."
        )
    if by_iters:
        rule.append(
            f"With one run a side: X = median throughput ({unit}/s) over iterations, slowest rank per "
            f"iteration; a change counts beyond x{cfg.factor:g} and if significant (Mann-Whitney U "
            f"p < {cfg.alpha:g} with >= {cfg.min_samples} samples per side; else, where both rows carry "
            f"the precision their stop rule reached, non-overlapping 95% CIs of the medians from it; else "
            f"non-overlapping {cfg.ci_level:.0%} CIs of the mean; the line below the table says which). "
            f"The run-to-run spread is unknown: iterations of one "
            f"run are not independent of its start-up and neighbours, so on a noisy machine compare "
            f"several runs (a baseline saved from 3 or more)."
        )
    if not rule:
        rule.append(f"ratio = current / baseline; a change counts beyond x{cfg.factor:g} and if significant.")
    lines = [
        f"### {title or 'ddlbench compare'}: {verdict} ({head})",
        "",
        *[r + "\n" for r in rule],
        "| cell | baseline X | current X | ratio | detects | p-value | status | note |",
        "|---|---:|---:|---:|---:|---:|---|---|",
    ]
    local = table[(table["scheme"] == "local") & table["status"].isin(["worse", "improved"])]
    if len(local):
        lines[2:2] = [
            f"Note: the 1-worker `local` cell (no communication) also changed "
            f"({', '.join(local['status'])}): the machine itself was likely faster or slower "
            f"(contention, clocks), not only the code under test.",
            "",
        ]
    for _, r in table.iterrows():
        test = str(r["test"] or "")
        p = _fmt(r["p_value"], ".3g") if test == "mann-whitney" or test.startswith("t ") else (test or "-")
        note = str(r["note"]).replace("|", "\\|").replace("\n", " ")
        detects = r.get("detects", math.nan)
        lines.append(
            f"| {r['cell']} | {_fmt(r['baseline_x'], '.1f')} | {_fmt(r['current_x'], '.1f')} | "
            f"{_fmt(r['ratio'], '.3f')} | {_fmt(detects, '.2f')} | {p} | {r['status']} | {note} |"
        )
    used = _uncertainty_line(table)
    if used:
        lines += ["", used]
    short = table.attrs.get("short_of_precision", [])
    if short:  # the stop rule (README, "Measuring"): a bound came first
        lines += ["", f"Precision not reached in the current run(s): {'; '.join(short)}."]
    if by_runs:
        rb = int(table["runs_baseline"].max())
        rc = int(table["runs_current"].max())
        lines.append("")
        machine = table.attrs.get("machine_spread", math.nan)
        d0 = table.attrs.get("machine_df", math.nan)
        worth = "as if known exactly" if d0 == math.inf else f"worth {_fmt(d0, '.1f')} runs' degrees of freedom"
        lines.append(
            f"Runs: {rb} baseline, {rc} current. Run-to-run spread (standard deviation of log run "
            f"medians): the machine's {_fmt(machine * 100, '.1f')}% ({worth}); "
            f"{_fmt(float(table['spread'].median()) * 100, '.1f')}% for the median cell, "
            f"{_fmt(float(table['spread'].max()) * 100, '.1f')}% for the noisiest."
        )
    return "\n".join(lines) + "\n"
