"""The study's prediction report (experiments/study_prediction/): its tables and findings stated from a predicted
curve, the networks in the order its panels take them.

    pytest -q tests/unit/experiments/test_study_prediction.py
"""

from __future__ import annotations

import pytest

from experiments.study_prediction.curve_report import (
    NETWORK_ORDER,
    best_methods,
    findings,
    in_order,
    interval_summary,
    size_table,
)
from harness.predict.predictor import SEVEN_METHODS
from harness.study import curve as study


@pytest.fixture(scope="module")
def curve():
    return study.with_intervals(study.compute_models(None, "flops"), "flops", samples=4, processes=1)


def test_the_report_answers_from_the_prediction(curve):
    best = best_methods(curve, list(SEVEN_METHODS))
    assert len(best) == 3 * 3 * 4
    assert (best["margin"] >= 0).all()
    found = findings(curve, list(SEVEN_METHODS))
    assert any(f.startswith("At 32 GPUs the predicted best method") for f in found)
    assert any("bert-large on one node (4 GPUs): speed-up over one GPU" in f for f in found)
    table = size_table(curve, 16, list(SEVEN_METHODS))
    assert table.count("\n") == 1 + 9 and "**" in table and "[" in table
    w = interval_summary(curve)
    assert 0 < w["median"] <= w["p90"] <= w["max"]


def test_networks_come_in_the_curves_order_then_the_others_as_first_seen():
    assert in_order(["eth-10g", "x", "ib-100g", "x", "eth-10g"], NETWORK_ORDER) == ["ib-100g", "eth-10g", "x"]
