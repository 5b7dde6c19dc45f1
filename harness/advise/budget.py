"""`ddlbench advise --budget`: the time the user gives, and what a try of a candidate costs (pure: a clock
and numbers in, sizes and notes out; the measuring loop is harness/advise/shortlist.py).

A try of a candidate is one cell: its start-up (the sweep file read, ranks forked, the model built, the
results written) plus (warmup + iters) iterations. Before any cell has run the iteration time is the
model's prediction and the start-up a guess; once cells have run, a measured candidate's own mean
iteration time is used, an unmeasured one's prediction is scaled by how far the measured ones were from
theirs, and the start-up is the largest the cells have shown (the runner's wall time less their
iterations). A new try is started only when its estimated cost fits in what is left, so the budget is
exceeded at most by one try's misestimate, itself bounded by the cell's timeout.
"""

from __future__ import annotations

import math
import re
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from harness.core.errors import UserError

DEFAULT_BUDGET = "10m"
"""`--budget` unless given: ten minutes, `ddlbench advise --workload bert-base-tiny --workers 2` on the
2-core box this project is developed on (issue 44)."""

STARTUP_GUESS_S = 10.0
"""A cell's start-up before one has been measured: 1-6 s per cell on the 2-core box with warm ranks
(reports/advise-validation/runs, wall_s less the iterations), plus the sweep's own reading and writing."""

MIN_ITERS = 5
"""The fewest measured iterations of a first try cut short by the budget: a 95% CI from 5 samples
(t = 2.78) still tells a 2x difference; fewer tells nothing."""

_UNITS = {"": 1, "s": 1, "m": 60, "min": 60, "h": 3600}


def parse_duration(text: str) -> float:
    """`90s`, `10m`, `1.5h`, `600` (seconds) as seconds; anything else is a UserError."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(s|m|min|h|)\s*", str(text))
    if not m or float(m.group(1)) <= 0:
        raise UserError(f"--budget {text!r} is not a duration: write e.g. 90s, 10m or 1h (a number alone is seconds)")
    return float(m.group(1)) * _UNITS[m.group(2)]


def duration_text(seconds: float) -> str:
    """600 -> '10m', 90 -> '90s', 7200 -> '2h'."""
    if not math.isfinite(seconds):
        return "none"
    for unit, size in (("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds / size:g}{unit}"
    return f"{seconds:.0f}s"


@dataclass
class Budget:
    """The time advise may take, counted by `clock` from its creation, plus what earlier invocations of
    the same run (before a --resume) spent."""

    total_s: float
    """The budget, seconds (math.inf: none)."""
    clock: Callable[[], float] = time.monotonic
    """Seconds, monotonic (a fake one in tests)."""
    spent_before_s: float = 0.0
    """Spent by the earlier invocations of this run."""
    start_s: float = field(init=False)

    def __post_init__(self) -> None:
        self.start_s = self.clock()

    def used_s(self) -> float:
        return self.spent_before_s + self.clock() - self.start_s

    def left_s(self) -> float:
        return max(0.0, self.total_s - self.used_s())


@dataclass
class Pace:
    """What a try costs, learned from the tries that ran (module docstring)."""

    warmup: int
    """Discarded iterations per cell."""
    startup_s: float = STARTUP_GUESS_S
    """A cell's cost beyond its iterations: the guess until a cell is measured, then the largest seen."""
    ratios: list[float] = field(default_factory=list)
    """Measured / predicted mean iteration time of each measured candidate."""
    measured_startup: bool = False

    def learn(self, predicted_s: float, mean_s: float, iters: int, elapsed_s: float) -> None:
        """A try of `iters` iterations with mean `mean_s` took `elapsed_s` through the runner."""
        if predicted_s > 0 and math.isfinite(predicted_s) and mean_s > 0:
            self.ratios.append(mean_s / predicted_s)
        startup = max(0.0, elapsed_s - (self.warmup + iters) * mean_s)
        self.startup_s = max(self.startup_s, startup) if self.measured_startup else startup
        self.measured_startup = True

    def iter_s(self, predicted_s: float, measured_s: float | None = None) -> float:
        """The iteration time to plan with: measured when there is one, else the prediction scaled by
        the median measured/predicted ratio so far."""
        if measured_s is not None and measured_s > 0:
            return measured_s
        return predicted_s * (statistics.median(self.ratios) if self.ratios else 1.0)

    def cost_s(self, iters: int, iter_s: float) -> float:
        return self.startup_s + (self.warmup + iters) * iter_s

    def fit(self, seconds: float, iter_s: float) -> int:
        """The most measured iterations a try can have in `seconds` (0 when not even the start-up fits)."""
        room = seconds - self.startup_s - self.warmup * iter_s
        if not iter_s > 0:
            return 0
        return max(0, int(min(room / iter_s, 1e9)))  # no budget: as many as asked


@dataclass
class Outcome:
    """What the budget allowed, for the report and the printed line."""

    budget_s: float
    """The budget, seconds."""
    used_s: float = 0.0
    """Seconds used (all invocations of this run)."""
    not_measured: list[str] = field(default_factory=list)
    """Shortlisted candidates with no try, for lack of time."""
    cut_short: list[str] = field(default_factory=list)
    """Candidates whose CI target was not reached for lack of time (their first try shortened, or a
    longer try that did not fit)."""
    rounds_run: int = 0
    """Alternated rounds of the best two measured."""
    rounds_skipped: int = 0
    """Alternated rounds wanted but left out for lack of time."""

    @property
    def ended(self) -> bool:
        """The budget cut something."""
        return bool(self.not_measured or self.cut_short or self.rounds_skipped)

    def line(self) -> str:
        """One sentence: the budget, the time used, and what was skipped for lack of time."""
        text = f"budget {duration_text(self.budget_s)}, used {self.used_s:.0f} s"
        if not self.ended:
            return text + "; nothing skipped for lack of time"
        cut = []
        if self.not_measured:
            cut.append(f"not measured: {', '.join(self.not_measured)}")
        if self.cut_short:
            cut.append(f"CI target not reached: {', '.join(self.cut_short)}")
        if self.rounds_skipped:
            cut.append(f"{self.rounds_skipped} alternated round(s) of the best two left out")
        return text + "; the budget ended (" + "; ".join(cut) + ")"
