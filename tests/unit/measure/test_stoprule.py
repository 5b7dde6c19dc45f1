"""The stop rule's logic (harness/measure/stoprule.py; README, "Measuring"): the median's order-statistic
interval, the block decision, the precision's spelling and the bounds' defaults, and that a fixed cell is
the cell it was before the rule."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from harness.contracts.cell import CellSpec, check_stop_rule, parse_precision, stop_bounds
from harness.core.errors import UserError
from harness.gate.compare import RESULT_COLUMNS
from harness.gate.markdown import to_markdown
from harness.measure.stoprule import BlockDecision, StopRule, median_ci, relative_half_width
from harness.results.summarize import short_of_precision


def test_the_median_interval_is_the_binomial_order_statistics():
    assert all(math.isnan(v) for v in median_ci(range(1, 6))[1:])  # 5 iterations: no 95% interval
    assert median_ci(range(1, 7)) == (3.5, 1.0, 6.0)  # x_(1), x_(6): 1 - 2/64 = 96.9%
    assert median_ci(range(1, 11)) == (5.5, 2.0, 9.0)
    assert median_ci(range(1, 101)) == (50.5, 40.0, 61.0)  # the textbook ranks for n = 100
    assert relative_half_width(range(1, 6)) == math.inf
    assert relative_half_width([10.0] * 8) == 0.0
    assert relative_half_width([9, 10, 10, 10, 10, 10, 10, 12]) == pytest.approx(0.2)  # the wider side


def test_the_median_interval_covers_at_least_95_percent():
    rng = np.random.default_rng(0)
    for n in (10, 31, 80):
        x = rng.lognormal(0.0, 0.5, size=(2000, n))  # skewed, as iteration times are; median exp(0) = 1
        covered = 0
        for row in x:
            _, low, high = median_ci(row)
            covered += low <= 1.0 <= high
        assert covered / len(x) >= 0.94, (n, covered)


def test_the_decision_stops_when_precise_or_at_a_bound():
    rule = StopRule(precision=0.05, min_iters=10, max_iters=30, max_time_s=60.0)
    quiet = [1.0, 1.01, 0.99] * 4
    noisy = list(np.random.default_rng(1).uniform(0.5, 1.5, 30))
    assert rule.decide(quiet[:9], 1.0) is None  # precise, but below min_iters
    assert rule.decide(quiet[:10], 1.0) == "reached"
    assert rule.decide(noisy[:20], 1.0) is None
    assert rule.decide(noisy[:20], 60.0) == "max-time"
    assert rule.decide(noisy, 1.0) == "max-iters"
    assert rule.decide(quiet * 3, 99.0) == "reached"  # reached wins over a bound hit at the same block
    assert [rule.next_block(d) for d in (0, 10, 15, 25, 28, 30)] == [10, 5, 5, 5, 2, 0]
    assert StopRule(0.05, 40, 100, 60).next_block(40) == 20


def test_every_rank_gets_rank_0s_decision_over_the_slowest_rank():
    """Two ranks' blocks: rank 0 takes per iteration the slower one's time; the broadcast hands its verdict to
    rank 1, whose own decision is never taken."""
    rule = StopRule(precision=0.05, min_iters=6, max_iters=100, max_time_s=60.0)
    mine = {0: [1.0] * 6, 1: [1.0, 1.5, 1.0, 1.5, 1.0, 1.5]}  # rank 1 is noisy: the slowest is too
    said = {}
    d0 = BlockDecision(rule, 0, gather=lambda x: [x, mine[1]], broadcast=lambda v: said.setdefault("v", v))
    d1 = BlockDecision(rule, 1, gather=lambda x: None, broadcast=lambda v: said["v"])
    for d in (d0, d1):
        d.start()
    assert d0.decide(mine[0]) is None and d1.decide(mine[1]) is None
    assert d0.slowest == mine[1] and d1.slowest == []
    said.clear()
    quiet = BlockDecision(rule, 0, gather=lambda x: [x, x], broadcast=lambda v: v)
    quiet.start()
    assert quiet.decide([1.0] * 6) == "reached"


@pytest.mark.parametrize("value, fraction", [(0.02, 0.02), ("0.02", 0.02), ("2%", 0.02), (" 2.5% ", 0.025), (1, 1.0)])
def test_a_precision_is_a_fraction_or_a_percentage(value, fraction):
    assert parse_precision(value) == pytest.approx(fraction)


@pytest.mark.parametrize("value", [0, -0.02, "0%", "150%", 2, "abc", "nan", "inf", True, [0.02], None, "%"])
def test_a_bad_precision_is_one_line(value):
    with pytest.raises(UserError) as e:
        parse_precision(value)
    assert "\n" not in str(e.value) and ("0.02" in str(e.value))


def test_the_bounds_default_from_the_cell():
    cell = CellSpec(workload="resnet50-tiny", scheme="ddp", iters=12, precision=0.02)
    assert stop_bounds(cell) == (12, 120, 300.0)
    assert stop_bounds(cell.with_(timeout_s=100.0)) == (12, 120, 50.0)  # half the cell's timeout
    assert stop_bounds(cell.with_(min_iters=20, max_iters=25, max_time_s=9)) == (20, 25, 9.0)
    check_stop_rule(cell)
    for bad in (dict(min_iters=0), dict(max_iters=5), dict(max_time_s=600.0), dict(max_time_s=-1)):
        with pytest.raises(UserError):
            check_stop_rule(cell.with_(**bad))
    with pytest.raises(UserError, match="give --precision P too"):
        check_stop_rule(cell.with_(precision=None, max_iters=50))


def test_a_fixed_cell_keeps_its_id_and_a_precision_cell_gets_its_own():
    fixed = CellSpec(workload="resnet50-tiny", scheme="ddp", workers=2)
    assert fixed.cell_id == "resnet50-tiny.ddp.torch.w2.541b5a51"  # as before the stop rule
    precise = fixed.with_(precision=0.02)
    assert precise.cell_id != fixed.cell_id
    assert precise.with_(max_iters=99).cell_id != precise.cell_id
    assert CellSpec.from_json(precise.to_json()) == precise


def test_a_cell_short_of_its_precision_is_one_line_in_show_and_compare():
    summary = pd.DataFrame(
        [
            dict(cell_id="a", stop_reason="reached", precision_reached=0.01, precision_target=0.02, samples=30),
            dict(cell_id="b", stop_reason="max-iters", precision_reached=0.041, precision_target=0.02, samples=300),
            dict(cell_id="c", stop_reason="fixed", precision_reached=math.nan, precision_target=math.nan, samples=10),
        ]
    )
    lines = short_of_precision(summary)
    assert lines == ["b: precision not reached, its median +-4.1% of +-2.0% asked (max-iters after 300 iterations)"]
    assert short_of_precision(summary.drop(columns="stop_reason")) == []  # a run from before the stop rule
    table = pd.DataFrame(columns=RESULT_COLUMNS)
    table.attrs["short_of_precision"] = lines
    assert "Precision not reached in the current run(s): b: precision not reached" in to_markdown(table)


def test_an_audited_rule_runs_on_to_its_bound_and_says_where_it_would_have_stopped():
    """DDLBENCH_STOP_AUDIT=1 (the stop rule's honesty check): the rule that would stop after the first block runs
    on to max-iters, and every rank learns the iteration it would have stopped at, once."""
    rule = StopRule(precision=0.05, min_iters=6, max_iters=16, max_time_s=60.0, audit=True)
    said = {}
    d0 = BlockDecision(rule, 0, gather=lambda x: [x, x], broadcast=lambda v: said.setdefault("v", v))
    d1 = BlockDecision(rule, 1, gather=lambda x: None, broadcast=lambda v: said["v"])
    d0.start()
    d1.start()
    verdicts = []
    for block in ([1.0] * 6, [1.0] * 5, [1.0] * 5):
        verdicts.append((d0.decide(block), d1.decide(block)))
        said.clear()
    assert verdicts == [(None, None), (None, None), ("max-iters", "max-iters")]
    assert d0.stopped_at == d1.stopped_at == 6
    plain = BlockDecision(StopRule(0.05, 6, 16, 60.0), 0, gather=lambda x: [x], broadcast=lambda v: v)
    plain.start()
    assert plain.decide([1.0] * 6) == "reached" and plain.stopped_at is None
