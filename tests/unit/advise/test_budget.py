"""`ddlbench advise --budget` (harness/advise/budget.py, shortlist.measure_all): the measuring planned to the
time given, on a fake clock and a fake measurement (each try costs its start-up plus its iterations).

    pytest -q tests/unit/advise/test_budget.py        # a second
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from harness.advise.budget import Budget, Outcome, Pace, duration_text, parse_duration
from harness.advise.candidates import Candidate, reference
from harness.advise.recommend import recommend
from harness.advise.shortlist import Measuring, Policy, alternated_rounds, measure_all
from harness.core.errors import UserError

STARTUP_S, WARMUP = 4.0, 2


class FakeBox:
    """A clock and cells: a try of `c` at `iters` takes STARTUP_S + (WARMUP + iters) x its true iteration
    time, with 10% noise per iteration (seeded per cell, so a try read back is the try that ran)."""

    def __init__(self, true_s: dict[str, float]):
        self.true_s, self.now, self.cells = true_s, 0.0, {}

    def clock(self) -> float:
        return self.now

    def run(self, c: Candidate, iters: int, run_dir: Path) -> None:
        key = (str(run_dir), c.label, iters)
        if key in self.cells:
            return
        self.now += STARTUP_S + (WARMUP + iters) * self.true_s[c.label]
        rng = np.random.default_rng(len(self.cells))
        self.cells[key] = list(self.true_s[c.label] * rng.normal(1.0, 0.1, iters))

    def read(self, run_dir: Path, c: Candidate, iters: int):
        samples = self.cells.get((str(run_dir), c.label, iters))
        if samples is None:
            return None, []
        return {"cell_id": f"{c.label}-{iters}-{run_dir.name}", "status": "ok", "iters": iters}, samples

    def tries(self, run_dir: Path, c: Candidate) -> list[int]:
        return sorted(i for d, label, i in self.cells if d == str(run_dir) and label == c.label)


REF = reference()
OTHERS = [
    Candidate("bsp-a2a", "torch"),
    Candidate("wfbp-a2a", "torch"),
    Candidate("dear", "torch"),
    Candidate("fsdp", "torch"),
]
SHORT = [*OTHERS, REF]  # as shortlist() gives it: best predicted first, DDP default last
TRUE = {"bsp-a2a": 0.9, "wfbp-a2a": 0.5, "dear": 0.55, "fsdp": 1.2, "ddp": 0.6}
PREDICTED = {"bsp-a2a": 0.3, "wfbp-a2a": 0.32, "dear": 0.33, "fsdp": 0.35, "ddp": 0.34}  # 2-3x optimistic


def advise(
    budget_s: float,
    box: FakeBox | None = None,
    run_dir: Path = Path("/run"),
    spent_before_s: float = 0.0,
    policy: Policy = Policy(iters=20, max_iters=200, target=0.03, rounds=3),
):
    box = box or FakeBox(TRUE)
    budget = Budget(budget_s, box.clock, spent_before_s)
    ms = Measuring(box.run, run_dir, policy, budget, Pace(WARMUP), PREDICTED, Outcome(budget_s), box.read, box.tries)
    measured = measure_all(SHORT, ms)
    first = recommend(measured)
    verdict = None
    if first.runner_up is not None and first.winner.estimate.overlaps(first.runner_up.estimate):
        verdict = alternated_rounds(first.winner, first.runner_up, ms, run_dir / "rounds", policy.rounds)
    ms.outcome.used_s = budget.used_s()
    return recommend(measured, verdict, ms.outcome), measured, box


def test_durations_parse_and_bad_text_is_a_user_error():
    assert parse_duration("10m") == 600 and parse_duration("90s") == 90 and parse_duration("1h") == 3600
    assert parse_duration("1.5h") == 5400 and parse_duration("600") == 600 and parse_duration(" 2 min ") == 120
    for bad in ("abc", "", "10x", "-5m", "0", "m"):
        with pytest.raises(UserError, match="not a duration"):
            parse_duration(bad)
    assert (duration_text(600), duration_text(90), duration_text(7200), duration_text(math.inf)) == (
        "10m",
        "90s",
        "2h",
        "none",
    )


def test_with_time_enough_every_candidate_reaches_its_target_as_without_a_budget():
    rec, measured, box = advise(math.inf)
    assert {m.candidate.label for m in measured} == set(TRUE)
    assert measured[0].candidate.is_reference, "DDP default is measured first"
    out = rec.budget
    assert not out.ended and out.not_measured == [] and out.cut_short == [] and out.rounds_skipped == 0
    for m in measured:  # each grew as next_iters grows it: CI within 3% or the 200-iteration bound
        hw = (m.estimate.high_s - m.estimate.mean_s) / m.estimate.mean_s
        assert hw <= 0.03 or int(m.row["iters"]) == 200
        assert box.tries(Path("/run"), m.candidate)[0] == 20
    assert rec.winner.candidate.label == "wfbp-a2a"
    assert "nothing skipped for lack of time" in rec.line()


def test_a_tiny_budget_measures_fewer_candidates_and_still_answers_within_it():
    rec, measured, box = advise(30.0)
    labels = [m.candidate.label for m in measured]
    assert labels[0] == "ddp" and 1 <= len(labels) < len(TRUE)
    out = rec.budget
    assert out.ended and out.not_measured and set(out.not_measured) | set(labels) == set(TRUE)
    # never beyond the budget by more than one try (the planner's estimate of a try was off at most)
    assert box.now <= 30.0 + STARTUP_S + (WARMUP + 20) * max(TRUE.values())
    line = rec.line()
    assert line.startswith("recommended: ") and "budget 30s" in line and "the budget ended" in line
    assert "not measured: " + ", ".join(out.not_measured) in line


def test_a_middling_budget_measures_the_first_tries_and_skips_refinement_and_rounds():
    rec, measured, box = advise(150.0)
    assert {m.candidate.label for m in measured} == set(TRUE), "every first try fits"
    out = rec.budget
    assert out.ended and out.cut_short and box.now <= 150.0 + STARTUP_S + (WARMUP + 200) * max(TRUE.values())
    assert "the budget ended" in rec.line()


def test_the_estimated_cost_learns_the_start_up_and_the_models_error():
    p = Pace(WARMUP)
    assert p.iter_s(0.3) == 0.3 and p.cost_s(20, 0.3) == pytest.approx(10 + 22 * 0.3)
    p.learn(predicted_s=0.3, mean_s=0.6, iters=20, elapsed_s=4.0 + 22 * 0.6)
    assert p.startup_s == pytest.approx(4.0) and p.iter_s(0.2) == pytest.approx(0.4) and p.iter_s(0.2, 0.5) == 0.5
    assert p.fit(4.0 + 22 * 0.5, 0.5) == 20 and p.fit(3.0, 0.5) == 0


def test_a_resumed_advise_takes_every_try_on_disk_and_counts_the_time_spent_before():
    box = FakeBox(TRUE)
    first, _, _ = advise(150.0, box)
    cells = dict(box.cells)
    again, _, box2 = advise(150.0, box, spent_before_s=first.budget.used_s)  # the clock goes on from where it was
    assert box2.cells == cells, "a resumed advise measured again"
    assert again.line().split("; budget")[0] == first.line().split("; budget")[0]


def test_two_candidates_the_budget_could_not_tell_apart_are_called_a_tie_at_the_budget():
    rec, _, _box = advise(45.0)
    assert rec.budget.ended and rec.verdict is None and rec.budget.rounds_skipped == 3
    assert f"tie at the budget: {rec.winner.candidate.label} and {rec.runner_up.candidate.label}" in rec.line()
