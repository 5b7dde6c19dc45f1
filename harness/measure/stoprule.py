"""A cell's stop rule: measure until the median is as precise as asked, and no longer (README, "Measuring";
docs/ARCHITECTURE.md, "Timing loop").

With `--precision P` a cell measures in blocks of iterations. After each block, outside the measured window,
every rank's iteration times of the block are gathered on rank 0, which takes per iteration the slowest rank's
time (the row's iteration time), and decides on all of them so far: stop when the 95% confidence interval of
their median lies within +-P of the median (`reached`), else when `max_iters` iterations are measured
(`max-iters`) or `max_time_s` seconds have passed since the first measured iteration (`max-time`), else run
another block. Rank 0 broadcasts the decision, so every rank stops after the same iteration; nothing inside a
measured iteration waits for it.

The interval is distribution-free: the order statistics x_(r) and x_(n+1-r) of the n sorted times, r the
largest rank with P(B < r) <= 2.5% for B ~ Binomial(n, 1/2) (scipy.special.bdtr, the binomial CDF, without
importing scipy.stats), which cover the median with probability >= 95% whatever the distribution of the
iterations (assumed independent); below 6 iterations no such interval exists. Its half-width is the larger
distance from the median to either end, relative to the median: the row's `precision_reached`. Pure, apart
from the gather and broadcast handed to `BlockDecision`.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy.special import bdtr

CONFIDENCE = 0.95
"""Coverage of the median's interval."""
MIN_BLOCK = 5
"""Fewest iterations of a block after the first."""
REASONS = ("reached", "max-iters", "max-time", "fixed")
"""How a cell stopped (the summary's `stop_reason`): fixed = no precision asked, exactly `iters` iterations."""


def median_ci(x, confidence: float = CONFIDENCE) -> tuple[float, float, float]:
    """(median, low, high): the distribution-free order-statistic interval of the median (module docstring);
    low and high are NaN when the sample is too small to have one."""
    a = np.sort(np.asarray(x, dtype=float))
    a = a[np.isfinite(a)]
    n = a.size
    if n == 0:
        return math.nan, math.nan, math.nan
    med = float(np.median(a))
    tail = (1 - confidence) / 2
    below = bdtr(np.arange(n), n, 0.5)  # P(B <= k), k = 0..n-1
    r = int(np.searchsorted(below, tail, side="right"))  # ranks r with P(B <= r-1) <= tail: the largest
    if r < 1:
        return med, math.nan, math.nan
    return med, float(a[r - 1]), float(a[n - r])


def relative_half_width(x, confidence: float = CONFIDENCE) -> float:
    """The median's CI half-width relative to the median (the larger side); inf when there is no interval."""
    med, low, high = median_ci(x, confidence)
    if not math.isfinite(low) or not med > 0:
        return math.inf
    return max(med - low, high - med) / med


AUDIT_VAR = "DDLBENCH_STOP_AUDIT"
"""1: every precision cell runs on past the point where its rule stops it, to its max-iters or max-time, and its
result records that point (`audit_stopped_at`): the stop rule's honesty check (experiments/stop_rule/)."""


@dataclass(frozen=True)
class StopRule:
    """A precision cell's stop rule, its bounds filled (harness/contracts/cell.stop_bounds)."""

    precision: float
    """Target: the median's 95% CI within +-precision x the median (a fraction)."""
    min_iters: int
    """Iterations of the first block: none stops before them."""
    max_iters: int
    """Most measured iterations."""
    max_time_s: float
    """No new block once this many seconds have passed since the first measured iteration."""
    audit: bool = False
    """Run on past the first `reached` to a bound (max-iters or max-time), so that the median at the stop can be
    held against the median at the end in the same ranks (AUDIT_VAR; the stop rule's honesty check,
    experiments/stop_rule/)."""

    def next_block(self, done: int) -> int:
        """Iterations of the next block when `done` are measured: min_iters first, then half of them (at least
        MIN_BLOCK), never beyond max_iters."""
        if done == 0:
            return min(self.min_iters, self.max_iters)
        return max(0, min(max(MIN_BLOCK, self.min_iters // 2), self.max_iters - done))

    def decide(self, slowest_iter_s, elapsed_s: float) -> str | None:
        """After a block: `reached`, `max-iters`, `max-time`, or None to run another block. `slowest_iter_s`:
        every measured iteration's time so far (the slowest rank's)."""
        n = len(slowest_iter_s)
        if not self.audit and n >= self.min_iters and relative_half_width(slowest_iter_s) <= self.precision:
            return "reached"
        if n >= self.max_iters:
            return "max-iters"
        if elapsed_s >= self.max_time_s:
            return "max-time"
        return None


class BlockDecision:
    """The decision taken once per block by every rank of a cell: `start()` when the first measured iteration
    begins, then `decide(block_iter_s)` with this rank's iteration times of the block. `gather(obj)` returns
    every rank's obj on rank 0 (None elsewhere), `broadcast(obj)` rank 0's obj on every rank (the transport's
    gather_object and broadcast_object); all ranks get the same answer (StopRule.decide)."""

    def __init__(
        self,
        rule: StopRule,
        rank: int,
        gather: Callable[[list], list | None],
        broadcast: Callable[[object], object],
        clock: Callable[[], float] = time.perf_counter,
    ):
        self.rule, self.rank, self.gather, self.broadcast, self.clock = rule, rank, gather, broadcast, clock
        self.slowest: list[float] = []
        """Rank 0: the slowest rank's time of each iteration measured so far."""
        self.t0 = math.nan
        self.stopped_at: int | None = None
        """With `rule.audit`: the measured iterations after the block where the rule would have stopped (None
        until then), as rank 0 decided it, on every rank."""

    def start(self) -> None:
        self.t0 = self.clock()

    def decide(self, block_iter_s: list[float]) -> str | None:
        parts = self.gather(list(block_iter_s))
        verdict, stopped_at = None, self.stopped_at
        if self.rank == 0:
            self.slowest += np.max(np.asarray(parts, dtype=float), axis=0).tolist()
            verdict = self.rule.decide(self.slowest, self.clock() - self.t0)
            n = len(self.slowest)
            if self.rule.audit and stopped_at is None and n >= self.rule.min_iters:
                stopped_at = n if relative_half_width(self.slowest) <= self.rule.precision else None
        if not self.rule.audit:
            return self.broadcast(verdict)
        verdict, self.stopped_at = self.broadcast((verdict, stopped_at))
        return verdict
