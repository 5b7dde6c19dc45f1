"""The changes of a history as Markdown (a CI job summary, `ddlbench history changes`, changes.md).

print(changes_markdown(scan("history/").changes, series=120, cell_runs=2400))
"""

from __future__ import annotations

import math

import pandas as pd

from harness.history.blind import Z95


def _pct(v) -> str:
    return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:+.1%}"


def _p(v) -> str:
    return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.1e}"


def changes_markdown(table: pd.DataFrame, series: int, cell_runs: int) -> str:
    """A table of changes, one line each: state, cell, size with its 95% CI, commits and the bisect command.
    `cell_runs`: the history's rows searched, one per cell measured in a run."""
    opened = table[(table["state"] == "open") & (table["kind"] == "change")]
    head = (
        f"## History: {len(opened)} open change(s) ({int(opened['confirmed'].sum())} confirmed) over {series} "
        f"series, {cell_runs} cell-runs\n"
    )
    if table.empty:
        return head + "\nNo change points.\n"
    lines = [
        head,
        "| state | cell | size (95% CI) | p | last good -> first bad | runs after | bisect / what changed |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in table.itertuples():
        state = r.state + (
            " (confirmed)" if r.kind == "change" and r.confirmed else " (awaiting runs)" if r.kind == "change" else ""
        )
        size = f"{_pct(r.size)} ({_pct(r.size_low)} .. {_pct(r.size_high)})" if r.kind == "change" else "-"
        commits = f"{str(r.last_good)[:12] or '?'} -> {str(r.first_bad)[:12] or '?'}"
        what = f"`{r.bisect}`" if r.bisect else (r.detail or "same commit: not a code change")
        if r.reason:
            what += f"; {r.reason}"
        runs_after = "-" if r.kind != "change" else str(int(r.runs_after))
        lines.append(
            f"| {state} | {r.cell} [{r.series}] | {size} | {_p(r.p_value)} | {commits} | {runs_after} | {what} |"
        )
    return "\n".join(lines) + "\n"


BLIND_LIST = 20
"""Series listed by `blind_markdown` unless all are asked for (the blindest first)."""


def _step(v) -> str:
    return "-" if v is None or math.isnan(v) else ("none up to 95%" if math.isinf(v) else f"{v:.0%}")


def blind_markdown(blind: pd.DataFrame, show_all: bool = False) -> str:
    """What the detector cannot see (harness/history/blind.py): per series, blindest first, the smallest
    slowdown found and confirmed in >= 90% of series of its noise and length, and what would bring it to 5%."""
    if blind.empty:
        return ""
    known = blind[blind["step"].notna()]
    after = int(blind["after"].min()) if len(blind) else 4
    head = (
        f"### Detectable steps: {int((known['step'] > 0.05).sum())} of {len(blind)} series blind to a 5% slowdown\n\n"
        f"The smallest slowdown found and confirmed in >= 90% of simulated series of the series' noise and length "
        f"over the next {after} runs, at the detector's 1% false-alarm budget (harness/history/blind.py).\n"
    )
    shown = blind if show_all else blind.head(BLIND_LIST)
    lines = [
        head,
        "| cell | runs | noise (run to run) | within a run (iterations) | blind below | what would bring it to 5% |",
        "|---|---|---|---|---|---|",
    ]
    for r in shown.itertuples():
        noise = "-" if math.isnan(r.noise) else f"{r.noise:.1%}"
        within = "-" if math.isnan(r.within) else f"{r.within:.1%} ({int(r.iters)})"
        own = getattr(r, "own", math.nan)
        if not math.isnan(own):  # the rows' precision_reached (harness/history/blind.py, run_sigma)
            within = f"{'' if within == '-' else within + ', '}median +-{own * Z95:.1%} reached"
        lines.append(
            f"| {r.cell} [{r.series}] | {int(r.runs)} | {noise} | {within} | {_step(r.step)} | {r.advice or '-'} |"
        )
    if len(shown) < len(blind):
        lines.append(f"\n... and {len(blind) - len(shown)} more series (`--all` lists them).")
    return "\n".join(lines) + "\n"
