"""The change-point search's penalty, chosen on a simulated null: how large a penalty keeps PELT from finding
any change in all but `false_rate` of pure-noise series of this length (detect.py standardises every series
by its own noise, so one table serves every noise level).

    k = penalty_factor(100)          # PELT's penalty on a standardised series is k * log(n)

The rate is what the store's users ask for (false change points in <= 1% of unchanged series), measured,
not assumed from a p-value: Otava's p = 0.001 t-test finds change points in 5-27% of pure 2% noise series.
Each series length is rounded up to a bucket (BUCKETS) and its factor simulated once (seeded, so the same on
every machine), then kept in memory and, given a folder, in `null-penalties.json` there.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from functools import cache
from pathlib import Path

import numpy as np
import ruptures as rpt
from scipy import stats as st

from harness.core.atomic import write_json_atomic

BUCKETS = (8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024)
"""Series lengths the factor is simulated at; a series uses the last bucket at or below its length (k falls
as n grows: 6.8 at 16 runs, 3 at 128, so rounding down is the careful side), the first below it."""
SERIES = 400
"""Simulated null series per bucket: 1% of 400 is 4 series, enough to place the 1% quantile to a few %."""
VERSION = 6
"""Of the search (standardise, change_points): part of every cache key, so a changed search is simulated and
run again, never read from an older cache."""
MIN_SEGMENT = 2
"""Fewest runs in a segment: a single odd run is an outlier, not a level."""


def robust_sigma(y: np.ndarray) -> float:
    """The noise of a series from its first differences, robust to its steps and outliers: the MAD of the
    differences scaled to a normal sigma (scipy's scale="normal": over the normal's 0.75 quantile, x 1.4826),
    over sqrt(2) (a difference of two draws has twice the variance); 0 for a series of one run or none."""
    d = np.diff(np.asarray(y, dtype=float))
    if d.size == 0:  # scipy answers nan (and warns) for an empty sample
        return 0.0
    return float(st.median_abs_deviation(d, scale="normal") / math.sqrt(2))


CLIP = 3.0
"""Robust sigmas from the series' median beyond which a run is clipped before the search: heavy-tailed noise
(one run in tens 5 sigma off) must not pass for a level of its own, and an L2 cost squares it. A real step
beyond it still moves every later run by CLIP sigmas, which PELT finds at once."""


def robust_z(y: np.ndarray) -> np.ndarray:
    """A series over its own noise: (relative medians - 1) / robust sigma (a flat series: sigma floored at 1e-4)."""
    y = np.asarray(y, dtype=float)
    rel = y / np.median(y) - 1
    return rel / max(robust_sigma(rel), 1e-4)


def standardise(y: np.ndarray) -> np.ndarray:
    """robust_z clipped at +-CLIP."""
    return np.clip(robust_z(y), -CLIP, CLIP)


def change_points(z: np.ndarray, penalty: float) -> list[int]:
    """PELT with the L2 cost (ruptures' KernelCPD with the linear kernel: PELT in C, the l2 cost exactly):
    the indices where a new segment starts."""
    if z.size < 2 * MIN_SEGMENT:
        return []
    bkps = rpt.KernelCPD(kernel="linear", min_size=MIN_SEGMENT).fit(z.reshape(-1, 1)).predict(pen=penalty)
    return [int(b) for b in bkps[:-1]]


def bucket(n: int) -> int:
    return max((b for b in BUCKETS if b <= n), default=BUCKETS[0])


def _any_change(series: list[np.ndarray], k: float) -> float:
    return float(np.mean([bool(change_points(z, k * math.log(z.size))) for z in series]))


@cache
def simulate(n: int, false_rate: float) -> float:
    """The smallest factor k (to 0.1) at which at most `false_rate` of SERIES normal-noise series of length n
    have a change point (bisection: the rate falls as k grows)."""
    rng = np.random.default_rng(20261129 + n)
    series = [standardise(1.0 + 0.02 * rng.standard_normal(n)) for _ in range(SERIES)]
    lo, hi = 0.5, 64.0
    while hi - lo > 0.1:
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if _any_change(series, mid) <= false_rate else (mid, hi)
    return round(hi, 2)


_KNOWN: dict[str, float] = {}


def remembered(known: dict, key: str, cache: Path | None, compute: Callable[[], object]):
    """A simulated value: from memory (`known`), the cache file (a JSON object, when given) or `compute()`, then
    kept in both. A torn or unreadable cache file is simulated again, never trusted."""
    if key in known:
        return known[key]
    stored = {}
    if cache and cache.exists():
        try:
            stored = json.loads(cache.read_text())
        except ValueError:
            stored = {}
    if key not in stored:
        stored[key] = compute()
        if cache:
            write_json_atomic(cache, stored, indent=1)
    known[key] = stored[key]
    return known[key]


def penalty_factor(n: int, false_rate: float = 0.01, cache_dir: str | Path | None = None) -> float:
    """k for a series of n runs (see the module docstring), from memory or the cache file when they have it."""
    b = bucket(n)
    cache = Path(cache_dir) / "null-penalties.json" if cache_dir else None
    return float(remembered(_KNOWN, f"{b}:{false_rate}:v{VERSION}", cache, lambda: simulate(b, false_rate)))
