"""The stop rule across ranks (README, "Measuring"; harness/measure/stoprule.py): a cell with a noisy rank
(DDLBENCH_FAULT=jitter) measures more iterations than a quiet one, each ends within its precision or at its
bound, and every rank stops on the same iteration; without a precision a cell runs exactly `iters`."""

from __future__ import annotations

import pandas as pd
import pytest

from harness.contracts.cell import CellSpec
from harness.experiment.cells import resolve
from harness.experiment.execute import run_cells
from harness.experiment.options import RunOptions

pytestmark = pytest.mark.slow

RULE = dict(precision=0.2, min_iters=10, max_iters=24)
"""Loose enough for a quiet tiny cell on a loaded 2-core box to reach at once (+-15% after 10 iterations
there); a rank sleeping 1 ms to 0.3 s at random (log-uniform) is a factor of about 3 either side after 10
iterations."""
TINY = dict(workload="resnet50-tiny", scheme="ddp", workers=2, warmup=1, iters=10, device="cpu", timeout_s=180)


def _run(tmp_path, name, cell, monkeypatch, fault=""):
    if fault:
        monkeypatch.setenv("DDLBENCH_FAULT", fault)
    else:
        monkeypatch.delenv("DDLBENCH_FAULT", raising=False)
    run = tmp_path / name
    run_cells([resolve(cell)], run, RunOptions(progress=False), run_id=name)
    row = pd.read_parquet(run / "summary.parquet").iloc[0]
    assert row["status"] == "ok", row["reason"]
    return row, pd.read_parquet(run / "raw.parquet")


def _within_or_bounded(row):
    if row["stop_reason"] == "reached":
        return row["precision_reached"] <= row["precision_target"] and row["samples"] >= RULE["min_iters"]
    return row["stop_reason"] == "max-iters" and row["samples"] == RULE["max_iters"]


def test_a_noisy_rank_measures_longer_and_every_rank_stops_together(tmp_path, monkeypatch):
    quiet, quiet_raw = _run(tmp_path, "quiet", CellSpec(**TINY, **RULE), monkeypatch)
    noisy, noisy_raw = _run(tmp_path, "noisy", CellSpec(**TINY, **RULE), monkeypatch, fault="jitter:1:0.3")
    assert noisy["samples"] > quiet["samples"], (quiet["samples"], noisy["samples"])
    for row in (quiet, noisy):
        assert _within_or_bounded(row), row[["samples", "precision_reached", "stop_reason"]].to_dict()
        assert row["precision_target"] == RULE["precision"] and row["iters"] == TINY["iters"]
    for row, raw in ((quiet, quiet_raw), (noisy, noisy_raw)):
        per_rank = raw.groupby("rank")["iteration"].agg(["count", "max"])
        assert list(per_rank.index) == [0, 1]
        assert (per_rank["count"] == row["samples"]).all() and (per_rank["max"] == row["samples"] - 1).all()


def test_without_a_precision_a_cell_runs_exactly_its_iterations(tmp_path, monkeypatch):
    row, raw = _run(tmp_path, "fixed", CellSpec(**{**TINY, "iters": 4}), monkeypatch)
    assert row["samples"] == 4 and row["stop_reason"] == "fixed"
    assert pd.isna(row["precision_target"]) and pd.isna(row["precision_reached"])
    assert (raw.groupby("rank").size() == 4).all()
