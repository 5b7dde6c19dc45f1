"""The detector's alarms measured, not assumed (`ddlbench history alarms`): how often the detector (detect.py)
raises one, on synthetic series with this machine's run-to-run spread, (a) unchanged (false alarms; normal noise,
and heavy-tailed noise: Student t with 3 degrees of freedom at the same standard deviation) and (b) with one step
of 2, 5 or 10% at a random run (detections), each run 20 iterations 1% around its level (the samples
Mann-Whitney tests).

    result = alarm_rates(0.02, series=1000, points=100)    # rates per case, and the oracle bound

A step is *found* when a kept change lies within one run of it, with its sign; *confirmed* when that change
is confirmed by the series' end. The *oracle bound* is what a detector that knew each series holds exactly one step
could do at this noise: it places the step at the least-squares split and calls it when that is within one
run and the difference of the two sides' mean run medians is beyond both the minimum size and 2.576
standard errors, so a rate below the
goal with a bound below it too says the goal is out of reach at this noise, not that the detector failed.
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

import numpy as np
import pandas as pd

from harness.core.atomic import write_json_atomic, write_text_atomic
from harness.core.errors import UserError
from harness.gate.baselines import load_rounds, resolve
from harness.gate.compare import iteration_throughputs, measured_cells
from harness.gate.keys import cell_key
from harness.history.detect import DetectorConfig, candidates, find_changes
from harness.history.null import penalty_factor, robust_sigma
from harness.history.scan import scan

STEPS = (0.02, 0.05, 0.10)
ITERS = 20
GOALS = "false change points in <= 1% of unchanged series; >= 90% of 5% steps and 100% of 10% steps found"


def machine_spread(spread: float | None, baseline: str | None, history) -> tuple[float, str]:
    """The run-to-run spread to simulate, and where it came from."""
    if spread:
        return float(spread), "given (--spread)"
    if baseline:
        meds: dict = {}
        for t in load_rounds(resolve(baseline)):
            s = measured_cells(t.summary)
            x = iteration_throughputs(s, t.raw)
            for _, r in s[s["status"] == "ok"].iterrows():
                if r["cell_id"] in x:
                    meds.setdefault(cell_key(r), []).append(float(np.median(x[r["cell_id"]])))
        sds = [float(np.std(np.log(v), ddof=1)) for v in meds.values() if len(v) >= 2]
        if not sds:
            raise UserError(
                f"baseline {baseline} has no cell measured in two or more rounds: save it from several "
                f"runs (`ddlbench baseline save NAME RUN1 RUN2 RUN3`) or give --spread"
            )
        return float(np.median(sds)), f"baseline {baseline}: median over {len(sds)} cells of the SD of log run medians"
    if history:
        rows = scan(history).rows
        sds = [
            robust_sigma(g["throughput_median"] / g["throughput_median"].median())
            for _, g in rows.groupby("series", observed=True)
            if len(g) >= 4
        ]
        if not sds:
            raise UserError(f"history {history} has no series of 4 or more runs: add runs first, or give --spread")
        return float(np.median(sds)), f"history {history}: median over {len(sds)} series of their robust noise"
    raise UserError(
        "history alarms needs the noise to simulate: give --spread (e.g. 0.02), --baseline NAME "
        "(a baseline saved from several runs) or --history DIR"
    )


def _series(rng, n: int, noise: float, heavy: bool, step: float, at: int) -> np.ndarray:
    e = rng.standard_t(3, n) / math.sqrt(3) if heavy else rng.standard_normal(n)
    return 100.0 * (1 + noise * e) * np.where(np.arange(n) >= at, 1 + step, 1.0)


def _oracle(m: np.ndarray, at: int, noise: float, cfg: DetectorConfig) -> bool:
    """Would a detector that knew the series holds exactly one step find it (module docstring)? Its place is
    the least-squares split; found when within one run, beyond the minimum size and 2.576 standard errors."""
    n, c = m.size, np.cumsum(m)
    t = np.arange(2, n - 1)
    left, right = c[t - 1] / t, (c[-1] - c[t - 1]) / (n - t)
    best = int(t[np.argmax(t * (n - t) * (left - right) ** 2)])
    est = m[best:].mean() / m[:best].mean() - 1
    se = noise * math.sqrt(1 / best + 1 / (n - best))
    return abs(best - at) <= 1 and abs(est) >= cfg.min_size and abs(est) >= 2.576 * se


def _one(rng, m: np.ndarray, k: float, cfg: DetectorConfig) -> list:
    if not candidates(m, k):
        return []
    samples = [x * (1 + 0.01 * rng.standard_normal(ITERS)) for x in m]
    return find_changes(m, samples, k, cfg)


def run_case(
    noise: float,
    series: int,
    points: int,
    step: float = 0.0,
    heavy: bool = False,
    seed: int = 0,
    cfg: DetectorConfig = DetectorConfig(),
) -> dict:
    """One case's rates over `series` synthetic series (module docstring)."""
    rng = np.random.default_rng(seed)
    k = penalty_factor(points, cfg.false_rate)
    any_kept = any_confirmed = found = confirmed = oracle = 0
    for _ in range(series):
        at = int(rng.integers(10, points - 10)) if step else points
        m = _series(rng, points, noise, heavy, step, at)
        changes = _one(rng, m, k, cfg)
        any_kept += bool(changes)
        any_confirmed += any(c.confirmed for c in changes)
        if step:
            hit = [c for c in changes if abs(c.at - at) <= 1 and np.sign(c.size) == np.sign(step)]
            found += bool(hit)
            confirmed += any(c.confirmed for c in hit)
            oracle += _oracle(m, at, noise, cfg)
    out = {
        "noise": "t3" if heavy else "normal",
        "step": step,
        "series": series,
        "points": points,
        "penalty_k": k,
        "series_with_a_change": any_kept / series,
        "series_with_a_confirmed_change": any_confirmed / series,
    }
    if step:
        out.update(found=found / series, confirmed=confirmed / series, oracle_bound=oracle / series)
    return out


def alarm_rates(noise: float, series: int = 1000, points: int = 100, seed: int = 0) -> dict:
    """Every case's rates at `noise` (module docstring): unchanged series, normal and heavy-tailed, then one
    step of each size in STEPS."""
    t0 = time.perf_counter()
    cases = [run_case(noise, series, points, heavy=h, seed=seed + i) for i, h in enumerate((False, True))]
    cases += [run_case(noise, series, points, step=-s, seed=seed + 10 + i) for i, s in enumerate(STEPS)]
    return {
        "spread": noise,
        "detector": DetectorConfig().__dict__,
        "cases": cases,
        "seconds": round(time.perf_counter() - t0, 1),
        "goals": GOALS,
    }


def write_alarms(result: dict, out: str | Path, source: str, stem: str = "alarms") -> str:
    """STEM.json and STEM.md in `out` (`history calibrate`, the old name, keeps its calibrate.*); returns the
    Markdown."""
    out = Path(out)
    result = {**result, "spread_source": source}
    rows = pd.DataFrame(result["cases"])
    lines = [
        f"## History detector: false alarms and detection at {result['spread']:.2%} run-to-run spread",
        "",
        f"Spread: {source}. {rows['series'].iloc[0]} series x {rows['points'].iloc[0]} runs per case, "
        f"{ITERS} iterations per run; {result['seconds']} s. Goals: {GOALS}.",
        "",
        "| noise | step | series with a change | with a confirmed change | steps found (+-1 run) | confirmed "
        "| oracle bound |",
        "|---|---|---|---|---|---|---|",
    ]
    pct = lambda v: "-" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.1%}"
    for r in rows.to_dict("records"):
        lines.append(
            f"| {r['noise']} | {pct(r['step']) if r['step'] else 'none'} | {pct(r['series_with_a_change'])} "
            f"| {pct(r['series_with_a_confirmed_change'])} | {pct(r.get('found'))} "
            f"| {pct(r.get('confirmed'))} "
            f"| {pct(r.get('oracle_bound'))} |"
        )
    md = "\n".join(lines) + "\n"
    write_text_atomic(out / f"{stem}.md", md)
    write_json_atomic(out / f"{stem}.json", json.loads(json.dumps(result, default=float)), indent=1)
    return md
