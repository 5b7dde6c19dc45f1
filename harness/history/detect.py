"""Change points of one series (one cell on one environment fingerprint), pure: arrays in, changes out.

    found = find_changes(run_medians, run_samples, penalty_factor(len(run_medians)), DetectorConfig())

1. Candidates: PELT with the L2 cost over the per-run medians (null.change_points), each series first
   divided by its median and by its own noise (null.robust_sigma: the MAD of first differences) and clipped
   at 3 of those sigmas, with the penalty k * log(n) whose k keeps false change points in at most 1% of
   pure-noise series (null.py); and the newest two runs when both are beyond the clip on one side
   (`candidates`).
2. A candidate is kept only when the per-iteration samples of the runs on its two sides differ (Mann-Whitney
   U, two-sided, p < `p_value`; the runs' medians when samples are missing) **and** its size (the ratio of
   the two sides' median run medians, minus 1) is at least `min_size`: a change too small to act on is
   not reported however significant. Rejected candidates are merged away and the rest judged again.
   Each kept change is then placed at the least-squares split of its neighbouring segments within two runs,
   on the unclipped medians (`_refine`), and judged again.
3. A kept change is *confirmed* once at least `confirm_runs` runs after its first run agree with the new
   level (each nearer the new level than the old). A change whose new level already ended (a later change
   came before it was confirmed) was a transient and is dropped; only the newest may wait for confirmation.
The size's 95% CI is a percentile bootstrap over the run medians of both sides (scipy.stats.bootstrap, `_size_ci`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats as st

from harness.history.null import CLIP, change_points, robust_z, standardise


@dataclass(frozen=True)
class DetectorConfig:
    min_size: float = 0.03
    """Smallest relative change reported (0.03 = 3%), either direction."""
    p_value: float = 0.001
    """Mann-Whitney U's two-sided p below which the two sides' samples differ."""
    false_rate: float = 0.01
    """Share of pure-noise series in which PELT may find a change point (null.py sets the penalty by it)."""
    min_runs: int = 8
    """Fewest ok runs a series needs before it is searched."""
    confirm_runs: int = 2
    """Runs after a change's first run that must agree with its new level to confirm it."""
    bootstrap: int = 1000
    """Resamples for the size's confidence interval."""


@dataclass(frozen=True)
class Change:
    at: int
    """Index (in the series' run order) of the first run at the new level."""
    size: float
    """new level / old level - 1 (throughput: negative is a slowdown)."""
    size_low: float
    """95% bootstrap CI of the size, low end."""
    size_high: float
    """... high end."""
    p_value: float
    """Mann-Whitney U between the two sides."""
    runs_after: int
    """Runs after the first one that agree with the new level."""
    confirmed: bool
    """runs_after >= DetectorConfig.confirm_runs."""


def _mw(a: list[np.ndarray], b: list[np.ndarray]) -> float:
    x, y = np.concatenate(a) if a else np.array([]), np.concatenate(b) if b else np.array([])
    if min(x.size, y.size) < 2 or np.ptp(np.concatenate([x, y])) == 0:
        return 1.0
    return float(st.mannwhitneyu(x, y, alternative="two-sided").pvalue)


def _size(left: np.ndarray, right: np.ndarray, axis: int = -1) -> np.ndarray:
    """The change's size, new median over old median - 1, along `axis` (scipy's bootstrap asks it of every
    resample at once)."""
    return np.median(right, axis=axis) / np.median(left, axis=axis) - 1


def _size_ci(left: np.ndarray, right: np.ndarray, cfg: DetectorConfig, seed: int) -> tuple[float, float]:
    """95% CI of the size: the two sides' run medians resampled each on its own (scipy.stats.bootstrap,
    two samples, unpaired), the percentile interval of the size over the resamples. Percentile, not BCa:
    a side holds as few as two runs, where the median's jackknife (BCa's acceleration) is degenerate (nan
    with a warning when a side is flat), and the percentile interval is what this CI has always meant.
    Seeded per change (`seed`): the same history gives the same bounds on every machine. `random_state`,
    not `rng`: the project allows scipy 1.10, and `rng` came in 1.15."""
    rng = np.random.default_rng(seed)
    if left.size < 2 and right.size < 2:
        return (float(_size(left, right)),) * 2
    if min(left.size, right.size) < 2:
        # scipy refuses a sample of one; a single run resamples to itself, so only the other side varies
        if left.size < 2:
            stat, data = (lambda x, axis=-1: _size(left, x, axis)), (right,)
        else:
            stat, data = (lambda x, axis=-1: _size(x, right, axis)), (left,)
    else:
        stat, data = _size, (left, right)
    ci = st.bootstrap(
        data,
        stat,
        n_resamples=cfg.bootstrap,
        vectorized=True,
        paired=False,
        confidence_level=0.95,
        method="percentile",
        random_state=rng,
    ).confidence_interval
    return float(ci.low), float(ci.high)


def _judge(m: np.ndarray, samples, bounds: list[int], i: int, cfg: DetectorConfig) -> Change | None:
    """The change at bounds[i] between the segments on either side of it, or None if it is not kept."""
    a, b, c = bounds[i - 1], bounds[i], bounds[i + 1]
    old, new = float(np.median(m[a:b])), float(np.median(m[b:c]))
    size = new / old - 1
    if abs(size) < cfg.min_size:
        return None
    left = [s for s in samples[a:b] if s is not None and len(s)] if samples is not None else []
    right = [s for s in samples[b:c] if s is not None and len(s)] if samples is not None else []
    enough = len(left) == b - a and len(right) == c - b
    p = _mw(left, right) if enough else _mw([m[a:b]], [m[b:c]])
    if not p < cfg.p_value:
        return None
    agree = int(sum(abs(x - new) < abs(x - old) for x in m[b + 1 : c]))
    low, high = _size_ci(m[a:b], m[b:c], cfg, seed=m.size * 7919 + b)
    return Change(b, size, low, high, p, agree, agree >= cfg.confirm_runs)


def _refine(m: np.ndarray, bkps: list[int], reach: int = 2) -> list[int]:
    """Each change moved, within `reach` runs, to the least-squares split of its two neighbouring segments on
    the unclipped medians: the clip that guards the search from outliers also blunts a step's first runs."""
    out, bounds = [], [0, *bkps, m.size]
    for i in range(1, len(bounds) - 1):
        a, c = (out[-1] if out else 0), bounds[i + 1]
        ts = [t for t in range(bounds[i] - reach, bounds[i] + reach + 1) if a + 2 <= t <= c - 2]
        cost = [np.var(m[a:t]) * (t - a) + np.var(m[t:c]) * (c - t) for t in ts]
        out.append(ts[int(np.argmin(cost))] if ts else bounds[i])
    return out


def candidates(medians, k: float) -> list[int]:
    """PELT's change points over the standardised series (null.py), and the newest two runs when both lie
    beyond the clip (null.CLIP: 3 robust sigmas) on one side of the level of the segment they end and PELT has
    not placed a change among the last three: two runs are too few for PELT to pay its penalty for (two
    clipped runs gain at most 2 x 3^2), yet two such runs in a row are a 1-in-100,000 event of normal noise.
    Found early, such a change waits for confirmation like any other."""
    m = np.asarray(medians, dtype=float)
    if m.size < 4:
        return []
    bkps = change_points(standardise(m), k * math.log(m.size))
    # the newest two against the level of the segment they end (not the whole series': after a step beyond
    # the clip, every later pair would lie beyond it and stand as a change of its own, unconfirming the step)
    z, start = robust_z(m), bkps[-1] if bkps else 0
    tail = z[-2:] - np.median(z[start:])
    if (not bkps or bkps[-1] < m.size - 3) and (np.all(tail >= CLIP) or np.all(tail <= -CLIP)):
        bkps = [*bkps, m.size - 2]
    return bkps


def find_changes(medians, samples, k: float, cfg: DetectorConfig = DetectorConfig()) -> list[Change]:
    """The kept changes of one series, oldest first (module docstring). `samples`: per run, its
    per-iteration throughputs (None or empty where unknown), or None."""
    m = np.asarray(medians, dtype=float)
    if m.size < cfg.min_runs or not np.all(np.isfinite(m) & (m > 0)):
        return []
    bkps = candidates(m, k)
    for _ in range(20):  # judge, merge the rejected away, place the rest; a fixed point within a few rounds
        bounds = [0, *bkps, m.size]
        judged = [_judge(m, samples, bounds, i, cfg) for i in range(1, len(bounds) - 1)]
        kept = [j.at for j in judged if j is not None]
        if kept == bkps:
            placed = _refine(m, bkps)
            if placed == bkps:
                break
            bkps = placed
            continue
        bkps = kept
    last = len(judged) - 1
    return [j for n, j in enumerate(judged) if j is not None and (j.confirmed or n == last)]


def stable_start(changes: list[Change], reset_at: list[int] = ()) -> int:
    """Where a series' latest stable segment starts: after its last confirmed change, or after the last
    change triaged as expected (`reset_at`: their `at`), whichever is later; 0 when there is none. A
    change awaiting confirmation does not move it."""
    ats = [c.at for c in changes if c.confirmed] + list(reset_at)
    return max(ats, default=0)
