"""What the detector cannot see: per series, the smallest step it would find, given the series' own noise and
length (issue 53). A quiet 2-core machine can spread a cell's run medians by 15%; at that noise a 30% step over
six runs is below what a detector held to 1% false alarms can call, and this says so instead of staying silent.

    step = detectable_step(runs=6, noise=0.13)         # 0.55: "blind below 55%"
    b = blind(runs=6, noise=0.13, within=0.2, iters=20)  # b.step, b.advice ("5% needs ...")

**Definition.** A series' *detectable step* is the smallest relative slowdown that, starting right after its
current runs (the `runs` of its latest stable segment, scan.py's stable_from on) and observed over the next
R = confirm_runs + 2 = 4 runs (or as many more as bring the series to the detector's min_runs, 8), is found
and confirmed by `find_changes` (a kept change within one run of the step, negative, confirmed) in at least
90% of simulated series of that length and noise, the detector held to its 1% false-alarm penalty
(null.penalty_factor of the whole simulated length, the detector's DetectorConfig otherwise). The noise is
null.robust_sigma of the series' relative run medians (what the detector standardises by); a series of fewer
than 2 runs has none.

**How.** Per length bucket (LENGTHS, rounded down: fewer runs is the careful side) and noise (NOISES, a
factor 2^(1/4) apart, rounded up: more noise never makes a step easier) SERIES series are simulated once,
seeded: run medians 1 + noise x normal, ITERS iterations each `noise` around its run (the samples Mann-Whitney
tests), a slowdown d from run `runs` on. For each the smallest d it is found at is bisected (to RESOLUTION
noise sigmas, over the same draws), and the table's step is the QUANTILE of those: the 93rd rather than the
90th percentile, a margin for the simulation's own sampling error, so that >= 90% are found at the stated step.
tests/unit/history/test_blind.py checks it (>= 90% found at the stated step, <= 1% false alarms in unchanged
series of that noise and length) by simulating the detector directly at two noise levels and two lengths.

Why not one table in noise sigmas scaled by each series' noise: the detector standardises by the noise, but
its minimum size (3%) is absolute and more than a floor (it also decides which splits by noise alone are kept,
the per-iteration test passing nearly any split of noisy runs). Measured at 16 runs: 4.4 sigmas at 1% noise and
4.25 at 4% (scaling holds there), but 7.25 at 0.5%, where the minimum size sets it. Simulating per noise level
needs no argument about where scaling holds, and costs a few seconds per level, once.
Tables are kept in memory and, given a folder, in `detectable-steps.json` there (the history's .cache/),
keyed by length bucket, grid noise, the detector's settings, SERIES and VERSION: a history needs one table
per (length bucket, noise level) its series hold, a few seconds each, once.

**What would help** (`blind`, `Blind.advice`): the noise s of run medians is between-run noise and the
iterations' own: a run median's relative sigma, from the precision its stop rule reached where the series' rows
carry `precision_reached` (the 95% CI's relative half-width / 1.96; `run_sigma`), else guessed as 1.2533 x
within-run spread / sqrt(iterations) (a median's standard error); more runs at this level lengthen the
before-side (the smallest length bucket up to ADVICE_RUNS whose table brings the step to TARGET, 5%); more
iterations per run (or a tighter --precision) shrink the iterations' part only, so when the between-run part
alone is above the noise a 5% step needs, more iterations cannot help and the advice says so.
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np
import pandas as pd
import scipy.stats as st

from harness.core.atomic import write_json_atomic
from harness.history import store
from harness.history.detect import DetectorConfig, candidates, find_changes
from harness.history.null import penalty_factor, remembered, robust_sigma

LENGTHS = (2, 3, 4, 5, 6, 8, 10, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256)
"""Series lengths (runs before the step) a table is simulated at; a series uses the last at or below its length."""
SERIES = 160
"""Simulated series per table."""
QUANTILE = 0.93
"""The share of simulated series found at the stated step: 90% plus a margin for 160 series' sampling error."""
ITERS = 20
"""Iterations per simulated run."""
MAX_SIGMAS = 16.0
"""Largest step searched, in noise sigmas (a series not found there counts as never found) ..."""
MAX_STEP = 0.95
"""... and at most a 95% slowdown."""
RESOLUTION = 0.25
"""Bisection's resolution, in noise sigmas (the found step rounds up to it: the careful side)."""
TARGET = 0.05
"""The step the advice aims at (5%)."""
ADVICE_RUNS = 64
"""Longest series (runs before a step) the advice considers."""
MEDIAN_SE = math.sqrt(math.pi / 2)
"""A median's standard error over the mean's (normal noise): 1.2533."""
Z95 = 1.959964
"""A 95% interval's half-width in sigmas: precision_reached / Z95 is a run median's relative sigma."""
VERSION = 1
"""Of the simulation: part of every cache key."""
SEED = 20261203


def after_runs(runs: int, cfg: DetectorConfig = DetectorConfig()) -> int:
    """Runs a step is observed over (module docstring): confirm_runs + 2, or up to min_runs in all."""
    return max(cfg.confirm_runs + 2, cfg.min_runs - runs)


def length_bucket(runs: int) -> int | None:
    return max((b for b in LENGTHS if b <= runs), default=None)


NOISES = tuple(round(0.0025 * 2 ** (i / 4), 5) for i in range(33))
"""The noise levels tables are simulated at (0.25% to 64%, a factor 2^(1/4) apart); a series' noise rounds up
to the next (more noise never makes a step easier to see: the careful side)."""


def noise_bucket(noise: float) -> float | None:
    """The grid noise a series is simulated at; None beyond the grid's last (64%: too noisy to tell)."""
    return next((g for g in NOISES if g >= noise * (1 - 1e-9)), None)


def _found(m: np.ndarray, samples, at: int, k: float, cfg: DetectorConfig) -> bool:
    if not candidates(m, k):
        return False
    return any(abs(c.at - at) <= 1 and c.size < 0 and c.confirmed for c in find_changes(m, samples, k, cfg))


def thresholds(
    runs: int, noise: float, cfg: DetectorConfig = DetectorConfig(), series: int = SERIES, cache_dir=None, seed=SEED
) -> np.ndarray:
    """Per simulated series (module docstring) the smallest slowdown found and confirmed (inf: not up to MAX_STEP),
    seeded: the same on every machine."""
    after = after_runs(runs, cfg)
    n = runs + after
    k = penalty_factor(n, cfg.false_rate, cache_dir)
    sim_cfg = dataclasses.replace(cfg, bootstrap=20)  # the size's CI plays no part in finding a change
    rng = np.random.default_rng(seed + runs)
    where = np.arange(n) >= runs
    top, res = min(MAX_SIGMAS * noise, MAX_STEP), RESOLUTION * noise
    out = []
    for _ in range(series):
        base = 1 + noise * rng.standard_normal(n)
        eps = 1 + noise * rng.standard_normal((n, ITERS))

        def found(d: float) -> bool:
            m = base * np.where(where, 1 - d, 1.0)  # noqa: B023 - called at once, in the loop that binds it
            return _found(m, list(m[:, None] * eps), runs, k, sim_cfg)  # noqa: B023 - called at once

        if not found(top):
            out.append(math.inf)
            continue
        lo, hi = 0.0, top
        while hi - lo > res:
            mid = (lo + hi) / 2
            lo, hi = (lo, mid) if found(mid) else (mid, hi)
        out.append(hi)
    return np.asarray(out)


_KNOWN: dict[str, float | None] = {}
"""Tables already known in this process: their step, None where it is beyond MAX_STEP (as the cache file has it)."""


def _key(runs: int, noise: float, cfg: DetectorConfig, series: int) -> str:
    return json.dumps([runs, noise, dataclasses.astuple(cfg), series, VERSION])


def table_step(runs: int, noise: float, cfg: DetectorConfig = DetectorConfig(), cache_dir=None, series=None) -> float:
    """The QUANTILE of `thresholds` at a length bucket and grid noise, from memory, the cache file or a fresh
    simulation (module docstring); inf when more than 1 - QUANTILE of the series are not found up to MAX_STEP."""
    series = SERIES if series is None else series
    cache = Path(cache_dir) / "detectable-steps.json" if cache_dir else None

    def simulated() -> float | None:
        q = float(np.quantile(thresholds(runs, noise, cfg, series, cache_dir), QUANTILE, method="higher"))
        return None if math.isinf(q) else round(q, 6)

    step = remembered(_KNOWN, _key(runs, noise, cfg, series), cache, simulated)
    return math.inf if step is None else float(step)


def detectable_step(
    runs: int, noise: float, cfg: DetectorConfig = DetectorConfig(), cache_dir=None, series: int | None = None
) -> float:
    """The smallest slowdown (0.30 = 30%) found and confirmed in >= 90% of series of this length and noise
    (module docstring); nan for a series of fewer than 2 runs or without a noise, inf when none up to MAX_STEP."""
    b = length_bucket(runs)
    if b is None or not (noise >= 0 and math.isfinite(noise)):
        return math.nan
    g = noise_bucket(noise)
    return math.inf if g is None else table_step(b, g, cfg, cache_dir, series)


@dataclass(frozen=True)
class Blind:
    runs: int
    """Runs the step would come after (the series' latest stable segment)."""
    noise: float
    """Run-to-run noise (null.robust_sigma of the relative run medians)."""
    step: float
    """The detectable step (module docstring); nan when unknown."""
    after: int
    """Runs after the step it is observed over."""
    within: float = math.nan
    """Within-run spread: the median over runs of each run's iterations' robust CV (nan without samples)."""
    iters: int = 0
    """Median iterations per run (0 without samples)."""
    more_runs: int | None = None
    """Runs at this level more that would bring the step to TARGET (None: not within ADVICE_RUNS)."""
    iterations: int | None = None
    """Iterations per run that would bring the step to TARGET (None: they cannot, or unknown)."""
    between: float = math.nan
    """The between-run part of the noise (the iterations' part taken out)."""
    needed_noise: float = math.nan
    """The noise at which the step would be TARGET, at this length."""
    own: float = math.nan
    """A run median's relative sigma from the rows' precision_reached (run_sigma); nan: guessed from `within`."""
    precision: float = math.nan
    """The --precision that would bring the step to TARGET (only with `own`; nan: none can)."""

    @property
    def label(self) -> str:
        """`blind below 12%`, or why there is no number."""
        if math.isnan(self.step):
            return "too few runs to tell"
        if math.isinf(self.step):
            return f"blind below any step up to {MAX_SIGMAS:.0f} sigmas ({MAX_SIGMAS * self.noise:.0%})"
        return f"blind below {self.step:.0%}"

    @property
    def advice(self) -> str:
        """What would bring the detectable step to TARGET (module docstring); "" when it is there."""
        if math.isnan(self.step) or self.step <= TARGET:
            return ""
        ways = []
        if self.more_runs is not None:
            ways.append(f"about {self.more_runs} more runs at this level")
        if self.iterations is not None:
            aim = f"; --precision {self.precision:.1%}" if self.precision > 0 else ""
            ways.append(f"about {self.iterations} iterations per run (now {self.iters}{aim})")
        if ways:
            return f"{TARGET:.0%} needs " + " or ".join(ways)
        if self.needed_noise == 0:  # no noise is low enough at this length: only a longer series helps
            return (
                f"{TARGET:.0%}: not after {self.runs} runs at any noise, nor within {ADVICE_RUNS} runs at this noise: "
                f"record more runs"
            )
        if not math.isnan(self.between) and not math.isnan(self.needed_noise):
            return (
                f"{TARGET:.0%}: none: between-run noise alone ({self.between:.1%}) is above the "
                f"{self.needed_noise:.1%} a {TARGET:.0%} step needs at {self.runs} runs"
            )
        return f"{TARGET:.0%}: not within {ADVICE_RUNS} runs; no per-iteration samples to weigh more iterations"


def _needed_noise(runs: int, cfg: DetectorConfig, cache_dir, series) -> float:
    """The largest noise at which a series of `runs` runs detects TARGET (bisection on a log scale)."""
    lo, hi = 1e-4, TARGET
    if detectable_step(runs, lo, cfg, cache_dir, series) > TARGET:
        return 0.0
    for _ in range(30):
        mid = math.sqrt(lo * hi)
        lo, hi = (mid, hi) if detectable_step(runs, mid, cfg, cache_dir, series) <= TARGET else (lo, mid)
    return lo


def _more_runs(runs: int, noise: float, cfg: DetectorConfig, cache_dir, series) -> int | None:
    """Fewest runs more (to a length bucket) that bring the step to TARGET: the longest bucket first (the step
    falls as the series grows), then a bisection over the buckets between."""
    longer = [b for b in LENGTHS if runs < b <= ADVICE_RUNS]
    ok = [lambda b=b: detectable_step(b, noise, cfg, cache_dir, series) <= TARGET for b in longer]
    if not longer or not ok[-1]():
        return None
    lo, hi = -1, len(longer) - 1  # ok[hi] holds; find the first that does
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if ok[mid]() else (mid, hi)
    return longer[hi] - runs


@lru_cache(maxsize=4096)
def _advice(
    runs: int, noise: float, within: float, iters: int, cfg: DetectorConfig, cache_dir, series, own: float = math.nan
):
    """(more runs, iterations per run, between-run noise, needed noise); `own`: a run median's relative sigma
    from the rows' precision_reached, else guessed from `within` and `iters` (module docstring)."""
    more = _more_runs(runs, noise, cfg, cache_dir, series)
    need = _needed_noise(runs, cfg, cache_dir, series)
    if math.isfinite(own):
        per_iter = own**2 * iters  # sigma^2 x iterations: what does not shrink with more iterations
    elif iters > 0 and math.isfinite(within):
        own, per_iter = MEDIAN_SE * within / math.sqrt(iters), (MEDIAN_SE * within) ** 2
    else:
        return more, None, math.nan, need
    between, iterations = math.sqrt(max(noise**2 - own**2, 0.0)), None
    if between < need and own > 0 and iters > 0:
        iterations = max(iters + 1, math.ceil(per_iter / (need**2 - between**2)))
    return more, iterations, between, need


def blind(
    runs: int,
    noise: float,
    within: float = math.nan,
    iters: int = 0,
    cfg: DetectorConfig = DetectorConfig(),
    cache_dir=None,
    series: int | None = None,
    own: float = math.nan,
) -> Blind:
    """The detectable step of a series and what would bring it to TARGET (module docstring); `own`: a run
    median's relative sigma from the rows' precision_reached (run_sigma), nan to guess it from `within`."""
    step = detectable_step(runs, noise, cfg, cache_dir, series)
    after = after_runs(runs, cfg)
    if math.isnan(step) or step <= TARGET:
        return Blind(runs, noise, step, after, within, iters, own=own)
    two = lambda v: float(f"{v:.2g}") if math.isfinite(v) else math.nan  # the advice cached to 2 figures
    more, iterations, between, need = _advice(
        runs, two(noise), two(within), int(iters), cfg, str(cache_dir) if cache_dir else None, series, two(own)
    )
    precision = math.nan
    if math.isfinite(own) and not math.isnan(between) and between < need:
        precision = Z95 * math.sqrt(need**2 - between**2)
    return Blind(runs, noise, step, after, within, iters, more, iterations, between, need, own, precision)


def within_spread(samples) -> tuple[float, int]:
    """(median over runs of each run's iterations' robust CV: MAD x 1.4826 over the median, median iterations
    per run) of a series' per-run samples; (nan, 0) without any. scipy's MAD unscaled, times the rounded 1.4826
    the reports were made with (scale="normal" is 1.482602...)."""
    cvs, counts = [], []
    for s in samples:
        x = np.asarray(s if s is not None else [], float)
        x = x[np.isfinite(x) & (x > 0)]
        if x.size >= 3:
            cvs.append(1.4826 * float(st.median_abs_deviation(x)) / float(np.median(x)))
            counts.append(x.size)
    if not cvs:
        return math.nan, 0
    return float(np.median(cvs)), int(np.median(counts))


def run_sigma(samples, reached) -> float:
    """A series' run median's relative sigma from its rows' precision_reached (module docstring): the median
    over runs of precision_reached / Z95, a run without it (a fixed cell) counted by the guess 1.2533 x its
    iterations' robust CV / sqrt(iterations); nan when no run carries precision_reached (then `blind` guesses
    as before the stop rule)."""
    reached = np.asarray([math.nan if v is None else float(v) for v in reached], float)
    if not np.isfinite(reached).any():
        return math.nan
    sigmas = []
    for s, p in zip(samples, reached):
        if math.isfinite(p):
            sigmas.append(p / Z95)
            continue
        w, n = within_spread([s])
        if n > 0 and math.isfinite(w):
            sigmas.append(MEDIAN_SE * w / math.sqrt(n))
    return float(np.median(sigmas))


BLIND_COLUMNS = [
    "series",
    "cell",
    "cell_key",
    "runs",
    "noise",
    "within",
    "iters",
    "step",
    "after",
    "label",
    "advice",
    "own",
]


def _within_by_series(history: Path, ok, sids: set, cache_dir: Path) -> dict:
    """(within-run spread, iterations, a run median's sigma from precision_reached: run_sigma) per series, read
    from the samples only for series whose newest run or length changed since `.cache/within.json` had them."""
    cache = cache_dir / "within.json"
    try:
        cached = json.loads(cache.read_text()) if cache.exists() else {}
    except ValueError:
        cached = {}
    sig = {sid: f"{len(g)}|{g['run_key'].iloc[-1]}" for sid, g in ok[ok["series"].isin(sids)].groupby("series")}
    stale = lambda sid: cached.get(sid, {}).get("sig") != sig.get(sid) or "own" not in cached.get(sid, {})
    need = {sid for sid in sids if stale(sid)}
    if need:
        rows, _ = store.read(history, columns=["run_key", "cell_key", "samples", "precision_reached"], series=need)
        for sid, g in rows.groupby("series"):
            w, n = within_spread(g["samples"])
            own = run_sigma(g["samples"], g.get("precision_reached", [math.nan] * len(g)))
            none = lambda v: None if math.isnan(v) else v
            cached[sid] = {"sig": sig.get(sid), "within": none(w), "iters": n, "own": none(own)}
        cache_dir.mkdir(parents=True, exist_ok=True)
        write_json_atomic(cache, cached)
    return {sid: cached.get(sid, {}) for sid in sids}


def series_blind(history, found, cfg: DetectorConfig = DetectorConfig(), series=None, only=None):
    """One row per series of a scan (scan.Scan; `only`: these series ids) with its noise, within-run spread,
    detectable step (`step`: nan too few runs, inf none up to MAX_STEP), `label` and `advice` (module docstring),
    blindest first."""
    history = Path(history)
    cache_dir = history / ".cache"
    ok, table = found.rows, found.series
    if only is not None:
        table = table[table["series"].isin(set(only))]
    within = _within_by_series(history, ok, set(table["series"]), cache_dir)
    meds = {sid: g["throughput_median"].to_numpy(float) for sid, g in ok.groupby("series")}
    out = []
    for r in table.itertuples():
        m = meds.get(r.series, np.array([]))
        noise = robust_sigma(m / np.median(m)) if m.size >= 2 else math.nan
        w = within.get(r.series, {})
        b = blind(
            int(r.runs - r.stable_from),
            noise,
            math.nan if w.get("within") is None else float(w["within"]),
            int(w.get("iters") or 0),
            cfg,
            cache_dir,
            series,
            math.nan if w.get("own") is None else float(w["own"]),
        )
        out.append(
            [r.series, r.cell, r.cell_key, b.runs, noise, b.within, b.iters, b.step, b.after, b.label, b.advice, b.own]
        )
    frame = pd.DataFrame(out, columns=BLIND_COLUMNS)
    return frame.sort_values("step", ascending=False, na_position="last", kind="stable").reset_index(drop=True)
