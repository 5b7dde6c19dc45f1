"""Statistics over per-iteration samples (pure; docs/ARCHITECTURE.md, "Timing loop").

Each figure is labelled for what it is: the median and IQR describe the spread of iterations; the
95% confidence interval is for the *mean*, t_{0.975,n-1} * s / sqrt(n) (Student's t quantile from
scipy.special.stdtrit, the inverse of its CDF: the same number as scipy.stats.t.ppf without importing
scipy.stats, half a second of every command's start-up).
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import stdtrit


def describe(x) -> dict:
    """Median, quartiles, IQR, mean, std, 95% CI of the mean, CV and n of a 1-D sample."""
    a = np.asarray(x, dtype=float)
    a = a[np.isfinite(a)]
    n = a.size
    if n == 0:
        nan = math.nan
        return dict(median=nan, q1=nan, q3=nan, iqr=nan, mean=nan, std=nan, ci95_low=nan, ci95_high=nan, cv=nan, n=0)
    q1, med, q3 = np.percentile(a, [25, 50, 75])
    mean = float(a.mean())
    std = float(a.std(ddof=1)) if n > 1 else 0.0
    half = float(stdtrit(n - 1, 0.975) * std / math.sqrt(n)) if n > 1 else math.nan
    return dict(
        median=float(med),
        q1=float(q1),
        q3=float(q3),
        iqr=float(q3 - q1),
        mean=mean,
        std=std,
        ci95_low=mean - half,
        ci95_high=mean + half,
        cv=std / mean if mean else math.nan,
        n=int(n),
    )


def slowest_rank(per_rank: dict[int, list[float]]) -> tuple[list[float], int]:
    """Iteration i's time is the slowest rank's; also returns the rank that was slowest most often."""
    ranks = sorted(per_rank)
    m = np.array([per_rank[r] for r in ranks], dtype=float)
    worst = m.argmax(axis=0)
    counts = np.bincount(worst, minlength=len(ranks))
    return m.max(axis=0).tolist(), ranks[int(counts.argmax())]


def busbw_factor(collective: str, n: int) -> float:
    """nccl-tests' bus-bandwidth factor: all-reduce moves 2(n-1)/n of the data per rank."""
    if collective == "allreduce":
        return 2.0 * (n - 1) / n if n > 1 else 1.0
    return 1.0
