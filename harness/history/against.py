"""The gate against the history: `ddlbench compare --history DIR CURRENT...` judges each cell of the current
runs against its series' latest stable segment (scan.py: the runs after its last confirmed or expected
change) instead of one stored baseline, with the gate's own statuses, rule and exit codes
(harness/gate/compare.py: each reference run is one round of the baseline side).

    markdown, code = compare_history("history/", ["results/<run-id>"], GateConfig(), fail_on="worse")

A cell measured before only on another environment fingerprint is `incomparable` (a new series, named by
what changed); one never measured is `new`. The current runs never count in their own reference (CI may
add them to the history first). With `fail_on="confirmed"`, an open confirmed change in a compared cell's
series also fails (exit 1) until it is triaged in annotations.yaml.

Each compared cell's series is shown with its detectable step (blind.py: the smallest slowdown the detector
would find and confirm in >= 90% of series of its noise and length) and what would bring it to 5%; with
`blind_above` (0.10 = 10%) every compared cell whose detectable step is above it is a warning line, and with
`fail_on="blind"` an error (exit 1).
"""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd

from harness.core.errors import UserError
from harness.gate.compare import GateConfig, compare_rounds, gate_exit_code
from harness.gate.markdown import to_markdown
from harness.history import store
from harness.history.blind import series_blind
from harness.history.fingerprint import differences
from harness.history.rows import raw_key, run_rows
from harness.history.scan import scan

FAIL_ON = ("worse", "confirmed", "blind")


def reference_rounds(rows: pd.DataFrame) -> list[tuple[pd.DataFrame, pd.DataFrame]]:
    """History rows (with samples) as the gate's rounds: one (summary, raw) per run, each cell's cell_id its
    series, its iterations' times back from the throughputs (global_batch / x)."""
    rounds = []
    for _, run in rows.groupby("run_key", sort=True, observed=True):
        summary = pd.DataFrame(
            [
                {
                    **raw_key(r.cell_key),
                    "cell_id": r.series,
                    "status": "ok",
                    "reason": "",
                    "source": "measured",
                    "sample_unit": r.sample_unit,
                    "global_batch": r.global_batch,
                    "host_heap": json.loads(r.fingerprint_fields or "{}").get("host_heap", "default"),
                    "precision_reached": float(getattr(r, "precision_reached", math.nan)),
                }
                for r in run.itertuples()
            ]
        )
        raw = pd.DataFrame(
            [
                {"cell_id": r.series, "rank": 0, "iteration": i, "iter_s": r.global_batch / x}
                for r in run.itertuples()
                for i, x in enumerate(np.asarray(r.samples, float))
                if x > 0
            ],
            columns=["cell_id", "rank", "iteration", "iter_s"],
        )
        rounds.append((summary, raw))
    return rounds


def _reference(history, found, current: pd.DataFrame) -> pd.DataFrame:
    """The history rows of each current cell's series from its stable start on, without the current runs."""
    start = dict(zip(found.series["series"], found.series["stable_from"]))
    ref = found.rows[found.rows["series"].isin(set(current["series"]))]
    if len(ref):
        stable = ref["position"] >= ref["series"].map(start).astype(int)
        ref = ref[stable & ~ref["run_key"].isin(set(current["run_key"]))]
    if ref.empty:
        return ref.assign(samples=pd.Series(dtype=object))
    with_samples, _ = store.read(history, columns=["run_key", "cell_key", "samples"], series=set(ref["series"]))
    return ref.merge(with_samples[["series", "run_key", "samples"]], on=["series", "run_key"], how="left")


def _environment_notes(table: pd.DataFrame, found, current: pd.DataFrame) -> pd.DataFrame:
    """`new` cells the history knows on another fingerprint: incomparable, with what changed."""
    known = found.rows.drop_duplicates("cell_key", keep="last").set_index("cell_key")
    by_id = current.drop_duplicates("cell_id").set_index("cell_id")
    for i, r in table[table["status"] == "new"].iterrows():
        cur = by_id.loc[r["current_cell_id"]] if r["current_cell_id"] in by_id.index else None
        if cur is not None and cur["cell_key"] in known.index:
            what = differences(known.loc[cur["cell_key"], "fingerprint_fields"], cur["fingerprint_fields"])
            table.loc[i, ["status", "note"]] = ["incomparable", f"environment changed, a new series ({what})"]
    return table


def _blind_lines(history, found, current: pd.DataFrame, blind_above: float | None) -> tuple[str, bool]:
    """The compared cells' detectable steps as Markdown, and whether any is above `blind_above`."""
    blind = series_blind(history, found, only=set(current["series"]))
    if blind.empty:
        return "", False
    md = "\n**Detectable steps** (the smallest slowdown found and confirmed in >= 90% of series of the cell's noise "
    md += f"and length over the next {int(blind['after'].min())} runs, at 1% false alarms):\n\n"
    md += "\n".join(
        f"- {r.cell}: {r.label}"
        + ("" if pd.isna(r.noise) else f" (noise {r.noise:.1%} run to run, {r.runs} runs)")
        + (f"; {r.advice}" if r.advice else "")
        for r in blind.itertuples()
    )
    md += "\n"
    over = blind[blind["step"].isna() | (blind["step"] > blind_above)] if blind_above is not None else blind.iloc[:0]
    for r in over.itertuples():
        step = "unknown (too few runs)" if pd.isna(r.step) else r.label.replace("blind below ", "")
        md += f"\n**Warning: {r.cell} is blind below {blind_above:.0%}**: its detectable step is {step}"
        md += f" (--blind-above {blind_above:.0%}){'; ' + r.advice if r.advice else ''}.\n"
    return md, len(over) > 0


def compare_history(
    history, runs: list, cfg: GateConfig, fail_on: str = "worse", repo=".", blind_above: float | None = None
) -> tuple[str, int]:
    """(Markdown, exit status) of the current runs (loaded run tables) against the history."""
    if fail_on not in FAIL_ON:
        raise UserError(f"--fail-on {fail_on!r} is not one of {', '.join(FAIL_ON)}")
    if fail_on == "blind" and blind_above is None:
        raise UserError("--fail-on blind needs --blind-above STEP: the step to fail above, e.g. --blind-above 10%")
    history = store.check_history(history)
    found = scan(history)
    current = pd.concat([run_rows(t, repo) for t in runs], ignore_index=True)
    ref = _reference(history, found, current)
    base = reference_rounds(ref) or [(pd.DataFrame(columns=["cell_id", "status", "workload"]), pd.DataFrame())]
    table = compare_rounds(base, [(t.summary, t.raw) for t in runs], cfg)
    table = _environment_notes(table, found, current)
    names = ", ".join(t.path.name for t in runs)
    md = to_markdown(table, cfg, title=f"ddlbench compare --history {history} {names}")
    md += "\n" + "\n".join(f"{line}." for line in found.problems)
    code = gate_exit_code(table)
    blind_md, too_blind = _blind_lines(history, found, current, blind_above)
    md += blind_md
    if fail_on == "blind" and too_blind:
        md += "\n`--fail-on blind`: a compared cell cannot see a step of the given size; exit status 1.\n"
        code = 1
    if fail_on == "confirmed":
        ch = found.changes
        hit = ch[
            (ch["state"] == "open")
            & ch["confirmed"]
            & (ch["kind"] == "change")
            & ch["series"].isin(set(current["series"]))
        ]
        if len(hit):
            md += "\n**Open confirmed changes** (`--fail-on confirmed`; triage them in annotations.yaml):\n\n"
            md += (
                "\n".join(
                    f"- {r.cell}: {r.size:+.1%} at {r.first_bad[:12] or r.first_bad_run} (series "
                    f"{r.series}){'; ' + r.bisect if r.bisect else ''}"
                    for r in hit.itertuples()
                )
                + "\n"
            )
            code = 1
    return md, code
