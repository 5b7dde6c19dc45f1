"""Measuring the shortlist within the budget (harness/advise/budget.py): a first try of each candidate, DDP
default and the best predicted first, then longer tries until the 95% CI of a candidate's mean iteration
time is within the target (bounded), then the best two in alternated rounds when their CIs overlap, each
step only while it fits in the time left.

Every try is an ordinary cell of an ordinary run directory, run through `run(candidate, iters, run_dir)`
(the command passes one over `ddlbench sweep`'s own function, so local, srun and testbed cells all run as
a sweep runs them), and a try already on disk is read back, not measured again: an interrupted advise
resumes where it stopped and takes the same decisions.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from harness.advise.budget import MIN_ITERS, Budget, Outcome, Pace
from harness.advise.candidates import Candidate
from harness.advise.decide import Estimate, Verdict, next_iters, paired_verdict, rel_half_width
from harness.results.store import load_run

Runner = Callable[[Candidate, int, Path], None]
"""run(candidate, iters, run_dir): measure that cell into run_dir (skipped when already there)."""


@dataclass(frozen=True)
class Policy:
    """How long to measure."""

    iters: int = 20
    """Measured iterations of a candidate's first try."""
    max_iters: int = 200
    """Bound on one try's iterations (the CI target is then given up, and said)."""
    target: float = 0.03
    """Half width of the 95% CI of the mean iteration time, relative to the mean."""
    rounds: int = 3
    """Alternated rounds of the best two when their CIs overlap (0 = none)."""


@dataclass
class Measured:
    """A candidate's measurement: every try's cell id, the last try's samples and summary row."""

    candidate: Candidate
    cell_ids: list[str] = field(default_factory=list)
    samples: list[float] = field(default_factory=list)
    row: dict = field(default_factory=dict)
    status: str = "ok"
    reason: str = ""

    @property
    def estimate(self) -> Estimate:
        return Estimate.of(self.samples)


def cell_row(run_dir: Path, c: Candidate, iters: int) -> tuple[dict | None, list[float]]:
    """The summary row of candidate `c` at `iters` in run_dir (None when absent) and its per-iteration
    times, each the slowest rank's (docs/ARCHITECTURE.md, "Timing loop")."""
    if not (run_dir / "summary.parquet").exists():
        return None, []
    tables = load_run(run_dir)
    s = tables.summary
    hit = s[
        (s["scheme"] == c.scheme)
        & (s["backend"] == c.backend)
        & (s["iters"] == iters)
        & (s["servers"].fillna(0).astype(int) == c.servers)
    ]
    hit = hit[[json.loads(k) == json.loads(c.knobs_json) for k in hit["knobs_json"]]]
    if c.servers:
        hit = hit[hit["server_hosts"] == c.server_hosts]
    if hit.empty:
        return None, []
    row = hit.iloc[-1].to_dict()
    raw = tables.raw
    if raw.empty or row["status"] != "ok":
        return row, []
    mine = raw[raw["cell_id"] == row["cell_id"]]
    return row, mine.groupby("iteration")["iter_s"].max().sort_index().tolist()


def tries_on_disk(run_dir: Path, c: Candidate) -> list[int]:
    """The iterations of candidate `c`'s tries already in run_dir, fewest first (its tries grow): what an
    interrupted advise measured, taken again on --resume whatever time is left."""
    if not (run_dir / "summary.parquet").exists():
        return []
    s = load_run(run_dir).summary
    hit = s[(s["scheme"] == c.scheme) & (s["backend"] == c.backend) & (s["servers"].fillna(0).astype(int) == c.servers)]
    hit = hit[[json.loads(k) == json.loads(c.knobs_json) for k in hit["knobs_json"]]] if len(hit) else hit
    if c.servers:
        hit = hit[hit["server_hosts"] == c.server_hosts]
    return sorted({int(i) for i in hit["iters"]})


@dataclass
class Measuring:
    """The measuring of a shortlist under a budget: what runs the cells, where, how long, what it cost."""

    run: Runner
    run_dir: Path
    policy: Policy
    budget: Budget
    pace: Pace
    predicted_s: dict[str, float]
    """Candidate label -> predicted mean iteration time, s."""
    outcome: Outcome
    read: Callable[[Path, Candidate, int], tuple[dict | None, list[float]]] = cell_row
    """(row, samples) of a candidate's try in a run directory: cell_row (a fake in the planner's tests)."""
    tries: Callable[[Path, Candidate], list[int]] = tries_on_disk
    """The iterations of a candidate's tries in a run directory: tries_on_disk."""

    def try_(self, m: Measured, iters: int) -> None:
        """One try of `m` at `iters` (read back when on disk); learns the pace from a try that ran."""
        ran = iters not in self.tries(self.run_dir, m.candidate)
        t = self.budget.clock()
        self.run(m.candidate, iters, self.run_dir)
        elapsed = self.budget.clock() - t
        row, samples = self.read(self.run_dir, m.candidate, iters)
        if row is None:
            m.status, m.reason = "failed", "the cell left no row (see the run directory's logs)"
            return
        m.cell_ids.append(row["cell_id"])
        m.row, m.samples = row, samples
        if row["status"] != "ok":
            m.status, m.reason = "failed", str(row.get("reason", ""))
        elif ran and samples:
            self.pace.learn(self.predicted_s.get(m.candidate.label, 0.0), m.estimate.mean_s, iters, elapsed)

    def iter_s(self, m: Measured) -> float:
        """The iteration time to plan `m`'s next try with (1 s when the model gave none)."""
        t = self.pace.iter_s(self.predicted_s.get(m.candidate.label, 0.0), m.estimate.mean_s if m.samples else None)
        return t if t > 0 and math.isfinite(t) else 1.0


def measure_all(short: list[Candidate], ms: Measuring) -> list[Measured]:
    """Measure the shortlist within the budget: first a try of every candidate, DDP default first, then the
    best predicted (each try sized to its share of the time left, at least MIN_ITERS; a candidate whose
    try does not fit is not measured, unless nothing has measured yet: advise answers from one
    measurement at least); then, while time remains, longer tries of the candidates whose CI is wider
    than the target, the best and those it overlaps first. With time enough this is what advise did
    without a budget: each candidate until its CI is within the target or a try reaches max_iters."""
    order = sorted(short, key=lambda c: not c.is_reference)
    measured = [Measured(c) for c in order]
    policy, least = ms.policy, min(ms.policy.iters, MIN_ITERS)
    for i, m in enumerate(measured):
        done = ms.tries(ms.run_dir, m.candidate)
        iters = done[0] if done else min(policy.iters, ms.pace.fit(ms.budget.left_s() / (len(order) - i), ms.iter_s(m)))
        if iters < least:
            if ms.pace.fit(ms.budget.left_s(), ms.iter_s(m)) < least and any(x.samples for x in measured):
                ms.outcome.not_measured.append(m.candidate.label)
                continue
            iters = least
        ms.try_(m, iters)
    measured = [m for m in measured if m.cell_ids or m.status != "ok"]
    while _refine_one(measured, ms):
        pass
    ms.outcome.cut_short = [m.candidate.label for m in measured if m.status == "ok" and _cut_by_time(m, policy)]
    return measured


def _cut_by_time(m: Measured, policy: Policy) -> bool:
    """Whether the candidate's CI target was left unreached for lack of time: a longer try was wanted and worth
    its start-up (at least 1.5x the last), and the refinement, which takes every such try that fits, did not
    take it. A try that --max-iters keeps under 1.5x the last is the bound's doing, not the budget's."""
    want = _wants_more(m, policy)
    return want is not None and want >= math.ceil(1.5 * int(m.row["iters"]))


def _wants_more(m: Measured, policy: Policy) -> int | None:
    return next_iters(int(m.row["iters"]), rel_half_width(m.samples), policy.target, policy.max_iters)


def _refine_one(measured: list[Measured], ms: Measuring) -> bool:
    """One longer try of the most informative candidate whose CI is still too wide and whose try fits
    (or is on disk); False when there is none."""
    ok = [m for m in measured if m.status == "ok" and m.samples]
    if not ok:
        return False
    best = min(ok, key=lambda m: m.estimate.mean_s)
    key = lambda m: (
        not (m is best or m.candidate.is_reference or m.estimate.overlaps(best.estimate)),
        m.estimate.mean_s,
    )
    for m in sorted(ok, key=key):
        want, last = _wants_more(m, ms.policy), int(m.row["iters"])
        if want is None:
            continue
        done = [n for n in ms.tries(ms.run_dir, m.candidate) if n > last]
        iters = done[0] if done else min(want, ms.pace.fit(ms.budget.left_s(), ms.iter_s(m)))
        if iters < math.ceil(1.5 * last):  # a try that cannot narrow the CI much is not worth its start-up
            continue
        ms.try_(m, iters)
        return True
    return False


def alternated_rounds(a: Measured, b: Measured, ms: Measuring, rounds_dir: Path, rounds: int) -> Verdict | None:
    """Re-measure a and b's last tries back to back, up to `rounds` times (A B, then B A, ...: neither
    always goes first), each round into its own run directory, while a round fits in the time left (or is
    on disk); the first pass counts as one more pair. None when no round fitted."""
    a_means, b_means = [a.estimate.mean_s], [b.estimate.mean_s]
    for r in range(1, rounds + 1):
        d = rounds_dir / f"r{r}"
        order = (a, b) if r % 2 else (b, a)
        cost = sum(
            ms.pace.cost_s(int(m.row["iters"]), m.estimate.mean_s)
            for m in order
            if int(m.row["iters"]) not in ms.tries(d, m.candidate)
        )
        if cost > ms.budget.left_s():
            ms.outcome.rounds_skipped = rounds - r + 1
            break
        for m in order:
            ms.run(m.candidate, int(m.row["iters"]), d)
        means = {}
        for m, key in ((a, "a"), (b, "b")):
            _, samples = ms.read(d, m.candidate, int(m.row["iters"]))
            if samples:
                means[key] = Estimate.of(samples).mean_s
        if len(means) == 2:
            a_means.append(means["a"])
            b_means.append(means["b"])
            ms.outcome.rounds_run += 1
    return paired_verdict(a_means, b_means) if len(a_means) > 1 else None


def frame(measured: list[Measured]) -> pd.DataFrame:
    """One row per measured candidate: label, status, tries, iterations, mean and 95% CI of the iteration
    time, its relative half width, and the last try's cell id."""
    rows = []
    for m in measured:
        e = m.estimate if m.samples else Estimate(float("nan"), float("nan"), float("nan"), 0)
        rows.append(
            {
                "label": m.candidate.label,
                "status": m.status,
                "reason": m.reason,
                "tries": len(m.cell_ids),
                "iters": int(m.row.get("iters", 0) or 0),
                "iter_s_mean": e.mean_s,
                "iter_s_ci95_low": e.low_s,
                "iter_s_ci95_high": e.high_s,
                "rel_half_width": rel_half_width(m.samples) if m.samples else float("nan"),
                "cell_id": m.cell_ids[-1] if m.cell_ids else "",
            }
        )
    return pd.DataFrame(rows)
