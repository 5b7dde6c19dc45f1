"""The regression gate's tests, one cell at a time (docs/ARCHITECTURE.md, "Regression gate").

    decide(base_iteration_x, cur_iteration_x, cfg)     # one run a side: asv's rule on iterations
    decide(base_x, cur_x, cfg, reached=(0.012, 0.009))  # the rows' precision_reached, where both carry it
    decide_rounds(base_run_medians, cur_run_medians, machine_prior(spreads), cells)   # several runs

Both return a dict with status (worse / improved / same / incomparable), the throughputs, the ratio
current / baseline, the p-value and `uncertainty` (which uncertainty the verdict used, in words);
harness/gate/compare.py matches cells and calls them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import special
from scipy import stats as st


@dataclass(frozen=True)
class GateConfig:
    factor: float = 1.10
    """A change must exceed this ratio of medians (1.10 = 10%) to count (asv's --factor)."""
    alpha: float = 0.05
    """Significance level (two-sided): of Mann-Whitney U on iterations, or of the whole gate over runs
    (each cell's moderated t at alpha / cells)."""
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


def median_interval(x, reached: float) -> tuple[float, float]:
    """The 95% CI of a throughput sample's median from the row's `precision_reached` (README, "Measuring"):
    the relative half-width p of its median iteration time's CI, so time within m (1 +- p) and throughput
    (batch / time) within X / (1 + p) .. X / (1 - p), X the median throughput."""
    med = float(np.median(np.asarray(x, dtype=float)))
    return med / (1 + reached), (med / (1 - reached) if reached < 1 else math.inf)


def usable_reached(reached) -> tuple[float, float] | None:
    """(baseline, current) precision_reached when both are finite and >= 0, else None (the rows of a fixed
    cell, or of one before the stop rule, carry NaN; fewer than 6 iterations, inf)."""
    if reached is None:
        return None
    pb, pc = (math.nan if v is None else float(v) for v in reached)
    return (pb, pc) if all(math.isfinite(v) and v >= 0 for v in (pb, pc)) else None


def significance(a, b, cfg: GateConfig = DEFAULT_GATE, reached=None) -> tuple[bool | None, float, str]:
    """Is the difference between samples a and b significant?  -> (significant, p-value, test).

    Mann-Whitney U with `min_samples` or more a side; else, where `reached` holds both rows' precision_reached
    (usable_reached), non-overlapping 95% CIs of the medians (median_interval, test `median-ci95`); else
    non-overlapping CIs of the mean. significant is None when there are too few samples for any test
    (fewer than 2 on a side; fewer than 1 with `reached`)."""
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    if min(a.size, b.size) >= cfg.min_samples:
        if np.ptp(np.concatenate([a, b])) == 0:  # all values equal: nothing differs
            return False, 1.0, "mann-whitney"
        p = float(st.mannwhitneyu(a, b, alternative="two-sided").pvalue)
        return (p < cfg.alpha), p, "mann-whitney"
    pair = usable_reached(reached)
    if pair is not None and min(a.size, b.size) >= 1:
        lo_a, hi_a = median_interval(a, pair[0])
        lo_b, hi_b = median_interval(b, pair[1])
        return (hi_a < lo_b or hi_b < lo_a), math.nan, "median-ci95"
    if min(a.size, b.size) < 2:
        return None, math.nan, "none"
    lo_a, hi_a = ci_of_mean(a, cfg.ci_level)
    lo_b, hi_b = ci_of_mean(b, cfg.ci_level)
    return (hi_a < lo_b or hi_b < lo_a), math.nan, f"ci{round(cfg.ci_level * 100)}"


def uncertainty(test: str, reached=None) -> str:
    """Which uncertainty a one-run-a-side verdict used, in words (the table's `uncertainty`); with both rows'
    precision_reached, their medians' 95% CIs are stated whichever test decided."""
    pair = usable_reached(reached)
    medians = f"medians' 95% CIs +-{pair[0]:.1%} / +-{pair[1]:.1%} (precision reached)" if pair else ""
    if test == "mann-whitney":
        return "; ".join(w for w in ("iterations (Mann-Whitney U)", medians) if w)
    if test == "median-ci95":
        return medians
    return f"{test[2:]}% CIs of the mean" if test.startswith("ci") else ""


def decide(base, cur, cfg: GateConfig = DEFAULT_GATE, reached=None) -> dict:
    """One cell's verdict from the two per-iteration throughput samples (higher is better); `reached`: the
    two rows' precision_reached (baseline, current), used where samples are too few for U (significance)."""
    base = np.asarray(base, dtype=float)
    cur = np.asarray(cur, dtype=float)
    out = {
        "baseline_x": float(np.median(base)) if base.size else math.nan,
        "current_x": float(np.median(cur)) if cur.size else math.nan,
        "n_baseline": int(base.size),
        "n_current": int(cur.size),
    }
    out["ratio"] = out["current_x"] / out["baseline_x"] if out["baseline_x"] else math.nan
    sig, p, test = significance(base, cur, cfg, reached)
    out.update(p_value=p, test=test, uncertainty=uncertainty(test, reached))
    if sig is None:
        return {**out, "status": "incomparable", "note": "fewer than 2 samples on a side"}
    return _verdict(out, sig, cfg, "not significant")


def _verdict(out: dict, sig: bool, cfg: GateConfig, not_sig_note: str) -> dict:
    """asv's rule on a computed ratio: worse or improved only when significant and beyond the factor;
    `same` otherwise, with `not_sig_note` when the ratio was beyond the factor."""
    beyond_down = out["ratio"] < 1 / cfg.factor
    beyond_up = out["ratio"] > cfg.factor
    if sig and beyond_down:
        return {**out, "status": "worse", "note": ""}
    if sig and beyond_up:
        return {**out, "status": "improved", "note": ""}
    return {**out, "status": "same", "note": not_sig_note if (beyond_down or beyond_up) else ""}


def log_spread(base, cur) -> tuple[float, int]:
    """(sum of squares, degrees of freedom) of a cell's log run medians about each side's mean."""
    lb = np.log(np.asarray(base, dtype=float))
    lc = np.log(np.asarray(cur, dtype=float))
    ss = float(((lb - lb.mean()) ** 2).sum() + ((lc - lc.mean()) ** 2).sum())
    return ss, lb.size + lc.size - 2


def _trigamma_inverse(y: float) -> float:
    """x with trigamma(x) = y (Newton's method on 1/trigamma, as limma's trigammaInverse)."""
    if y > 1e7:
        return 1 / math.sqrt(y)
    if y < 1e-6:
        return 1 / y
    x = 0.5 + 1 / y
    for _ in range(50):
        tri = float(special.polygamma(1, x))
        step = tri * (1 - tri / y) / float(special.polygamma(2, x))
        x += step
        if -step / x < 1e-8:
            break
    return x


def machine_prior(spreads: list[tuple[float, int]]) -> tuple[float, float]:
    """(s0^2, d0): the machine's run-to-run variance and how many degrees of freedom it is worth, fitted to
    the cells' (sum of squares, df) of log run medians by empirical Bayes (Smyth 2004, limma's fitFDist:
    each cell's variance is s0^2 times a scaled chi-square; moments of log s^2). d0 is infinite when the
    cells' variances scatter no more than sampling alone would (then every cell shares s0^2), small when
    cells differ (a bimodal cell then keeps most of its own spread)."""
    fit = [(ss / d, d) for ss, d in spreads if d > 0 and ss > 0]
    if len(fit) < 2:
        return (fit[0][0] if fit else 0.0), 0.0
    s2 = np.array([v for v, _ in fit])
    d = np.array([float(k) for _, k in fit])
    e = np.log(s2) - special.digamma(d / 2) + np.log(d / 2)
    evar = float(e.var(ddof=1) - np.mean(special.polygamma(1, d / 2)))
    if evar <= 0:
        return float(math.exp(e.mean())), math.inf
    d0 = 2 * _trigamma_inverse(evar)
    return float(math.exp(e.mean() + special.digamma(d0 / 2) - math.log(d0 / 2))), d0


def decide_rounds(
    base, cur, cfg: GateConfig = DEFAULT_GATE, prior: tuple[float, float] = (0.0, 0.0), cells: int = 1
) -> dict:
    """One cell's verdict from its per-run medians (one number per run of the sweep, higher is better):
    a moderated t on their logs (Smyth 2004), plus the factor (docs/ARCHITECTURE.md, "Regression gate").

    The cell's variance is its own (pooled over both sides' runs) shrunk toward the machine's, `prior` =
    (s0^2, d0) from machine_prior: s^2 = (d0 s0^2 + d s_own^2) / (d0 + d) with d0 + d degrees of freedom.
    `cells` tests are made at once: each at alpha / cells (Bonferroni), so an unchanged sweep fails the
    gate with probability <= alpha."""
    lb = np.log(np.asarray(base, dtype=float))
    lc = np.log(np.asarray(cur, dtype=float))
    nb, nc = lb.size, lc.size
    ss, d = log_spread(base, cur)
    s0sq, d0 = prior
    if math.isinf(d0):
        s2, df = s0sq, 1e6  # every cell shares the machine's variance, known from many runs
    else:
        s2, df = ((d0 * s0sq + ss) / (d0 + d), d0 + d) if d0 + d > 0 else (0.0, 0.0)
    diff = float(lc.mean() - lb.mean())
    out = {
        "baseline_x": float(math.exp(lb.mean())),
        "current_x": float(math.exp(lc.mean())),
        "ratio": float(math.exp(diff)),
        "test": f"t {nb}+{nc} runs",
        "uncertainty": "run-to-run spread (moderated t)",
        "runs_baseline": nb,
        "runs_current": nc,
        "spread": math.sqrt(ss / d) if d > 0 else math.nan,
    }
    if df <= 0:
        return {
            **out,
            "p_value": math.nan,
            "detects": math.nan,
            "status": "incomparable",
            "note": "one run a side and no other cell's spread to go by",
        }
    se = math.sqrt(s2) * math.sqrt(1 / nb + 1 / nc)
    a = cfg.alpha / max(1, cells)
    t_crit = float(st.t.ppf(1 - a / 2, df))
    p = min(1.0, float(2 * st.t.sf(abs(diff) / se, df)) * max(1, cells)) if se > 0 else (0.0 if diff else 1.0)
    out.update(p_value=p, detects=float(min(1 / cfg.factor, math.exp(-t_crit * se))))
    return _verdict(out, p < cfg.alpha, cfg, "within the run-to-run spread")
