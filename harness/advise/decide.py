"""The statistics `ddlbench advise` decides with (pure: samples in, numbers and verdicts out).

- a cell is measured until the 95% CI of its mean iteration time is within `target` of the mean
  (`t_{0.975,n-1} s / sqrt(n) / mean`, docs/ARCHITECTURE.md, "Timing loop"); the iterations for the next
  try come from the CI's 1/sqrt(n) shrinkage, bounded;
- two candidates whose CIs overlap are re-measured in alternated rounds (A B A B ...): each round gives
  one ratio of their mean iteration times taken minutes apart, so a drift of the machine hits both; the
  verdict is a Student t interval on the logs of those ratios (and the first pass's ratio);
- the gain over the reference is a ratio of means with a delta-method 95% CI.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats as st

from harness.measure.stats import describe


def rel_half_width(samples) -> float:
    """Half width of the 95% CI of the mean, relative to the mean (inf with fewer than 2 samples)."""
    d = describe(samples)
    if d["n"] < 2 or not d["mean"]:
        return math.inf
    return (d["ci95_high"] - d["mean"]) / d["mean"]


def next_iters(iters: int, rel_hw: float, target: float, max_iters: int) -> int | None:
    """Measured iterations for the next try of a cell whose CI is `rel_hw` wide after `iters`, or None
    when it is narrow enough or the bound is reached. The CI shrinks as 1/sqrt(n): n' = n (w/target)^2,
    plus 20% for the t quantile and the noise of w itself; at least 1.5 n so that a try is worth its
    start-up."""
    if rel_hw <= target or iters >= max_iters:
        return None
    want = iters * (rel_hw / target) ** 2 * 1.2 if math.isfinite(rel_hw) else 2 * iters
    return int(min(max_iters, max(math.ceil(1.5 * iters), math.ceil(want))))


@dataclass(frozen=True)
class Estimate:
    """A mean iteration time with its 95% CI."""

    mean_s: float
    low_s: float
    high_s: float
    n: int

    @classmethod
    def of(cls, samples) -> Estimate:
        d = describe(samples)
        return cls(d["mean"], d["ci95_low"], d["ci95_high"], d["n"])

    def overlaps(self, other: Estimate) -> bool:
        return not (self.high_s < other.low_s or other.high_s < self.low_s)


def gain(best: Estimate, ref: Estimate) -> tuple[float, float, float]:
    """(gain, low, high) of throughput over the reference: ref time / best time - 1, the 95% CI from the
    delta method on the log ratio (each mean's relative standard error added in quadrature)."""
    ratio = ref.mean_s / best.mean_s
    se = math.hypot(_rel_se(best), _rel_se(ref))
    z = st.norm.ppf(0.975)
    return ratio - 1, ratio * math.exp(-z * se) - 1, ratio * math.exp(z * se) - 1


def _rel_se(e: Estimate) -> float:
    if e.n < 2 or not e.mean_s:
        return 0.0
    return (e.high_s - e.mean_s) / st.t.ppf(0.975, e.n - 1) / e.mean_s


@dataclass(frozen=True)
class Verdict:
    """Which of two candidates is faster, from paired rounds."""

    winner: int
    """0 or 1: the one with the lower mean time over the rounds."""
    ratio: float
    """Geometric mean over rounds of time(loser) / time(winner) (> 1)."""
    low: float
    """95% CI of that ratio, low end."""
    high: float
    """95% CI of that ratio, high end."""
    tied: bool
    """The CI holds 1: the data cannot tell them apart."""
    rounds: int
    """Paired observations behind it."""


def paired_verdict(a_means: list[float], b_means: list[float]) -> Verdict:
    """Verdict over rounds: round i measured A and B back to back (mean iteration times a_i, b_i)."""
    logs = np.log(np.asarray(b_means, dtype=float) / np.asarray(a_means, dtype=float))
    n = logs.size
    m = float(logs.mean())
    half = float(st.t.ppf(0.975, n - 1) * logs.std(ddof=1) / math.sqrt(n)) if n > 1 else math.inf
    winner = 0 if m >= 0 else 1
    sign = 1 if winner == 0 else -1
    lo, hi = sorted((math.exp(sign * (m - half)), math.exp(sign * (m + half))))
    return Verdict(winner, math.exp(abs(m)), lo, hi, tied=lo <= 1.0 <= hi, rounds=int(n))
