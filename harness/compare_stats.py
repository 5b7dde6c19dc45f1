"""The regression gate's tests, one cell at a time (docs/ARCHITECTURE.md, "Regression gate").

    decide(base_iteration_x, cur_iteration_x, cfg)     # one run a side: asv's rule on iterations
    decide_rounds(base_run_medians, cur_run_medians)   # several runs: Student's t on log run medians

Both return a dict with status (worse / improved / same / incomparable), the throughputs, the ratio
current / baseline and the p-value; harness/compare.py matches cells and calls them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats as st


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


DEFAULT_GATE = GateConfig()


def ci_of_mean(x, level: float = 0.99) -> tuple[float, float]:
    """Student-t confidence interval of the mean: mean -/+ t_{(1+level)/2, n-1} s / sqrt(n)."""
    a = np.asarray(x, dtype=float)
    n = a.size
    if n < 2:
        return (math.nan, math.nan)
    half = float(st.t.ppf((1 + level) / 2, n - 1) * a.std(ddof=1) / math.sqrt(n))
    m = float(a.mean())
    return (m - half, m + half)


def significance(a, b, cfg: GateConfig = DEFAULT_GATE) -> tuple[bool | None, float, str]:
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


def decide(base, cur, cfg: GateConfig = DEFAULT_GATE) -> dict:
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


def log_spread(base, cur) -> tuple[float, int]:
    """(sum of squares, degrees of freedom) of a cell's log run medians about each side's mean."""
    lb = np.log(np.asarray(base, dtype=float))
    lc = np.log(np.asarray(cur, dtype=float))
    ss = float(((lb - lb.mean()) ** 2).sum() + ((lc - lc.mean()) ** 2).sum())
    return ss, lb.size + lc.size - 2


def decide_rounds(base, cur, cfg: GateConfig = DEFAULT_GATE, machine: tuple[float, int] = (0.0, 0),
                  cells: int = 1) -> dict:
    """One cell's verdict from its per-run medians (one number per run of the sweep, higher is better):
    Student's two-sample t on their logs, plus the factor (docs/ARCHITECTURE.md, "Regression gate").

    The spread is the cell's own or the machine's, whichever is larger: `machine` is (s, df) pooled over
    every compared cell, so a cell is never assumed quieter than the machine, and a cell noisier than it
    keeps its own spread and degrees of freedom. `cells` tests are made at once: each at alpha / cells
    (Bonferroni), so the gate as a whole calls a change with probability <= alpha when nothing changed."""
    lb = np.log(np.asarray(base, dtype=float))
    lc = np.log(np.asarray(cur, dtype=float))
    nb, nc = lb.size, lc.size
    ss, df = log_spread(base, cur)
    own = math.sqrt(ss / df) if df > 0 else 0.0
    s, df = (own, df) if own > machine[0] or machine[1] < 1 else machine
    d = float(lc.mean() - lb.mean())
    out = {"baseline_x": float(math.exp(lb.mean())), "current_x": float(math.exp(lc.mean())),
           "ratio": float(math.exp(d)), "test": f"t {nb}+{nc} runs", "runs_baseline": nb, "runs_current": nc,
           "spread": own}
    if df < 1:
        return {**out, "p_value": math.nan, "detects": math.nan, "status": "incomparable",
                "note": "one run a side and no other cell's spread to go by"}
    se = s * math.sqrt(1 / nb + 1 / nc)
    a = cfg.alpha / max(1, cells)
    t_crit = float(st.t.ppf(1 - a / 2, df))
    p = min(1.0, float(2 * st.t.sf(abs(d) / se, df)) * max(1, cells)) if se > 0 else (0.0 if d else 1.0)
    out.update(p_value=p, detects=float(min(1 / cfg.factor, math.exp(-t_crit * se))))
    sig = p < cfg.alpha
    if sig and out["ratio"] < 1 / cfg.factor:
        return {**out, "status": "worse", "note": ""}
    if sig and out["ratio"] > cfg.factor:
        return {**out, "status": "improved", "note": ""}
    beyond = out["ratio"] < 1 / cfg.factor or out["ratio"] > cfg.factor
    return {**out, "status": "same", "note": "within the run-to-run spread" if beyond else ""}
