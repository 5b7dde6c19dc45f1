"""The history uses the precision a run's stop rule reached (issue 63 item 2; README, "Measuring"): a history row
carries the summary's `precision_reached` (NaN where the run had none, or its store was written before the
column), and the detectable step's advice takes a run median's uncertainty from it (precision_reached / 1.96 as
a relative sigma) instead of guessing it from the iterations' spread; series without it are advised as before.

    pytest -q tests/unit/history/test_reached.py      # seconds: small detectable-step tables (conftest.py)
"""

from __future__ import annotations

import math

import pyarrow.parquet as pq
import pytest

from harness.history import blind, store, synthetic
from harness.history.markdown import blind_markdown
from harness.history.rows import run_rows
from harness.history.scan import scan

CELLS = ["resnet50-tiny:ddp"]


def test_a_reached_precision_replaces_the_guessed_uncertainty_of_a_run_median():
    """20 iterations 30% apart guess a run median 11.9% uncertain, most of 2% run-to-run noise gone to the
    iterations: more iterations would help. The rows say their medians reached +-0.8%: the noise is between
    runs, and more iterations cannot help."""
    guessed = blind.blind(16, 0.02, within=0.3, iters=10)
    assert math.isnan(guessed.own) and guessed.iterations and "iterations per run" in guessed.advice
    reached = blind.blind(16, 0.02, within=0.3, iters=10, own=0.008 / blind.Z95)
    assert reached.own == pytest.approx(0.008 / blind.Z95)
    assert reached.between == pytest.approx(math.sqrt(0.02**2 - (0.008 / blind.Z95) ** 2), rel=0.05)
    assert reached.iterations is None and "between-run noise alone" in reached.advice, reached.advice
    # where iterations help, the advice also names the --precision that would do
    loose = blind.blind(16, 0.02, within=0.3, iters=10, own=0.039 / blind.Z95)
    assert loose.iterations and "--precision" in loose.advice, loose.advice
    assert 0 < loose.precision < 0.039


def test_run_sigma_is_the_median_of_the_rows_reached_precision():
    samples = [[1.0, 1.1, 0.9, 1.05]] * 3
    assert math.isnan(blind.run_sigma(samples, [math.nan] * 3))  # no row carries it: guessed as before
    assert blind.run_sigma(samples, [0.02, 0.04, 0.06]) == pytest.approx(0.04 / blind.Z95)
    within, n = blind.within_spread(samples[:1])
    mixed = blind.run_sigma(samples, [0.02, None, 0.06])  # a fixed run among them: its guess counts
    assert mixed == pytest.approx(
        sorted([0.02 / blind.Z95, blind.MEDIAN_SE * within / math.sqrt(n), 0.06 / blind.Z95])[1]
    )


def _history(tmp_path, reached: float | None, runs: int = 10):
    h = tmp_path / "history"
    for t in synthetic.series_runs(runs, CELLS, spread=0.03, iters=20, seed=2):
        rows = run_rows(t)
        if reached is not None:
            rows = rows.assign(precision_reached=reached)
        store.append(rows, h)
    return h


def test_a_series_whose_rows_carry_precision_reached_is_advised_from_it(tmp_path):
    plain = blind.series_blind(_history(tmp_path / "a", None), scan(tmp_path / "a" / "history")).iloc[0]
    h = _history(tmp_path / "b", 0.01)
    table = blind.series_blind(h, scan(h))
    r = table.iloc[0]
    assert math.isnan(plain["own"]) and r["own"] == pytest.approx(0.01 / blind.Z95)
    assert r["noise"] == plain["noise"] and r["within"] == plain["within"] and r["iters"] == plain["iters"]
    expect = blind.blind(int(r["runs"]), r["noise"], r["within"], int(r["iters"]), cache_dir=h / ".cache")
    assert plain["advice"] == expect.advice  # without the column: as before
    own = blind.blind(
        int(r["runs"]), r["noise"], r["within"], int(r["iters"]), cache_dir=h / ".cache", own=0.01 / blind.Z95
    )
    assert r["advice"] == own.advice
    assert "median +-1.0% reached" in blind_markdown(table)
    assert "reached" not in blind_markdown(
        blind.series_blind(tmp_path / "a" / "history", scan(tmp_path / "a" / "history"))
    )


def test_a_store_written_before_the_column_reads_it_as_nan(tmp_path):
    h = _history(tmp_path, None, runs=2)
    for f in store.files(h):  # as an older ddlbench wrote them: no precision_reached column
        pq.write_table(pq.read_table(f).drop_columns(["precision_reached"]), f)
    rows, problems = store.read(h)
    assert not problems and rows["precision_reached"].isna().all()
    t = synthetic.series_runs(3, CELLS, spread=0.03, seed=2)[-1]
    store.append(run_rows(t).assign(precision_reached=0.02), h)
    rows, problems = store.read(h)
    assert not problems and sorted(rows["precision_reached"].fillna(-1)) == [-1, -1, 0.02]
    assert "precision_reached" in run_rows(t).columns
