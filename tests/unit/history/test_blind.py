"""What the detector cannot see (harness/history/blind.py, issue 53): the stated detectable step is one at which
the detector finds and confirms >= 90% of simulated steps, with <= 1% false alarms in unchanged series of that
noise and length (two noise levels, two lengths, measured with fresh draws); `history changes`, the page and
`compare --history` show it; `--blind-above` warns and `--fail-on blind` fails; bad values are one line, exit
2; a baseline saved from several runs is added to a history with every round.

    pytest -q tests/unit/history/test_blind.py        # about a minute on 2 cores: the acceptance simulation
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

from harness.cli.main import cli
from harness.history import blind, store, synthetic
from harness.history.detect import DetectorConfig, find_changes
from harness.history.null import penalty_factor
from harness.history.rows import run_rows

CELLS = ["resnet50-tiny:ddp", "bert-base-tiny:bsp-a2a"]
PRODUCTION = blind.SERIES  # before the conftest's fixture makes the tables small
MEASURED = 200


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def _measure(runs: int, noise: float, step: float, seed: int) -> tuple[float, float]:
    """(share of series whose slowdown `step` after `runs` runs is found and confirmed, share of unchanged series
    with any kept change), the real detector on fresh draws."""
    cfg = DetectorConfig()
    n = runs + blind.after_runs(runs, cfg)
    k = penalty_factor(n, cfg.false_rate)
    rng = np.random.default_rng(seed)
    found = false = 0
    for _ in range(MEASURED):
        base = 1 + noise * rng.standard_normal(n)
        eps = 1 + noise * rng.standard_normal((n, blind.ITERS))
        stepped = base * np.where(np.arange(n) >= runs, 1 - step, 1.0)
        changes = find_changes(stepped, list(stepped[:, None] * eps), k, cfg)
        found += any(abs(c.at - runs) <= 1 and c.size < 0 and c.confirmed for c in changes)
        false += bool(find_changes(base, list(base[:, None] * eps), k, cfg))
    return found / MEASURED, false / MEASURED


@pytest.mark.parametrize("runs, noise", [(6, 0.04), (16, 0.01), (16, 0.04)])
def test_the_stated_step_is_found_in_90_percent_with_1_percent_false_alarms(runs, noise):
    assert blind.noise_bucket(noise) == noise  # a grid noise: the stated step is this noise's, not a rounded one
    step = blind.detectable_step(runs, noise, series=PRODUCTION)
    assert 0.03 <= step < 0.95
    found, false = _measure(runs, noise, step, seed=99 + runs)
    assert found >= 0.90, (runs, noise, step, found)
    assert false <= 0.01, (runs, noise, false)
    smaller, _ = _measure(runs, noise, step * 0.6, seed=7)  # and it is not needlessly large
    assert smaller < 0.90, (runs, noise, step, smaller)


def test_more_noise_or_fewer_runs_never_state_a_smaller_step():
    steps = {(r, s): blind.detectable_step(r, s) for r in (6, 16) for s in (0.01, 0.04)}
    assert steps[6, 0.04] >= steps[16, 0.04] and steps[6, 0.01] >= steps[16, 0.01]
    assert steps[6, 0.04] >= steps[6, 0.01] and steps[16, 0.04] >= steps[16, 0.01]
    assert np.isnan(blind.detectable_step(1, 0.01))


def test_the_advice_says_when_more_iterations_cannot_help():
    noisy = blind.blind(6, 0.13, within=0.05, iters=20)  # the VM: run medians 13% apart
    assert noisy.step > 0.3 and noisy.label.startswith("blind below")
    assert noisy.iterations is None and "between-run noise alone" in noisy.advice, noisy
    iterations = blind.blind(16, 0.02, within=0.3, iters=10)  # the iterations' own noise is most of it
    assert iterations.iterations and iterations.iterations > 10 and "iterations per run" in iterations.advice
    assert blind.blind(16, 0.0025).advice == ""
    short = blind.blind(3, 0.027, within=0.066, iters=3)  # three runs: no noise is low enough, only more runs help
    assert short.needed_noise == 0 and short.advice.startswith("5%: not after 3 runs at any noise"), short.advice


def test_a_table_is_simulated_once_and_then_read_from_the_cache(tmp_path, monkeypatch):
    first = blind.detectable_step(8, 0.02, cache_dir=tmp_path)
    stored = json.loads((tmp_path / "detectable-steps.json").read_text())
    assert len(stored) == 1
    monkeypatch.setattr(blind, "_KNOWN", {})
    monkeypatch.setattr(blind, "thresholds", lambda *a, **k: pytest.fail("simulated again"))
    assert blind.detectable_step(8, 0.02, cache_dir=tmp_path) == first


def _history(tmp_path, spread, runs=10):
    h = tmp_path / "history"
    for t in synthetic.series_runs(runs, CELLS, spread=spread, seed=2):
        store.append(run_rows(t), h)
    return h


def test_history_changes_and_the_page_say_what_each_series_is_blind_to(tmp_path):
    h = _history(tmp_path, 0.03)
    res = invoke("history", "changes", "--history", h)
    assert res.exit_code == 0, res.output
    assert "Detectable steps" in res.output and res.output.count("blind") >= 1, res.output
    assert "resnet50-tiny" in res.output.split("Detectable steps")[1]
    page = tmp_path / "h.html"
    assert invoke("history", "report", "--history", h, "-o", page).exit_code == 0
    text = page.read_text()
    assert text.count("class='blind'") == len(CELLS) and "blind below" in text
    assert "Detectable steps" in page.with_suffix(".md").read_text()


def test_blind_above_warns_and_fail_on_blind_fails(tmp_path):
    h = _history(tmp_path, 0.05, runs=8)
    (cur,) = synthetic.series_runs(1, CELLS, spread=0.05, seed=5, first=8)
    run = synthetic.write_run_dir(cur, tmp_path / "current")
    res = invoke("compare", "--history", h, run, "--blind-above", "10%")
    assert ("Detectable steps" in res.output and "5% needs" in res.output) or "5%: none" in res.output, res.output
    warned = [line for line in res.output.splitlines() if line.startswith("**Warning:")]
    assert len(warned) == len(CELLS) and all("blind below 10%" in w for w in warned), res.output
    gate_code = res.exit_code
    res = invoke("compare", "--history", h, run, "--blind-above", "10%", "--fail-on", "blind")
    assert res.exit_code == 1 and "--fail-on blind" in res.output, res.output
    res = invoke("compare", "--history", h, run, "--blind-above", "0.95", "--fail-on", "blind")
    assert "**Warning:" not in res.output and res.exit_code == gate_code, res.output


@pytest.mark.parametrize(
    "extra, words",
    [
        (["--blind-above", "abc"], "is not a step"),
        (["--blind-above", "-5%"], "between 0 and 100%"),
        (["--blind-above", "0"], "between 0 and 100%"),
        (["--blind-above", "150%"], "between 0 and 100%"),
        (["--fail-on", "blind"], "needs --blind-above"),
    ],
)
def test_bad_blind_values_are_one_line_and_exit_2(tmp_path, extra, words):
    h = _history(tmp_path, 0.01, runs=4)
    run = synthetic.write_run_dir(synthetic.series_runs(1, CELLS, first=4)[0], tmp_path / "current")
    res = invoke("compare", "--history", h, run, *extra)
    assert res.exit_code == 2, res.output
    assert words in res.output and len(res.output.strip().splitlines()) == 1, res.output


def test_blind_above_without_history_is_one_line_and_exit_2(tmp_path):
    res = invoke("compare", "a", "b", "--blind-above", "10%")
    assert res.exit_code == 2 and "needs --history" in res.output and len(res.output.strip().splitlines()) == 1


def test_history_add_of_a_baseline_saved_from_several_runs_adds_every_round(tmp_path):
    runs = [synthetic.write_run_dir(t, tmp_path / f"r{i}") for i, t in enumerate(synthetic.series_runs(3, CELLS))]
    res = invoke("baseline", "save", "three", *runs, "--dir", tmp_path / "baselines")
    assert res.exit_code == 0, res.output
    h = tmp_path / "history"
    res = invoke("history", "add", tmp_path / "baselines" / "three", "--history", h)
    assert res.exit_code == 0 and res.output.count("added") == 3, res.output
    rows, _ = store.read(h)
    assert rows["run_key"].nunique() == 3 and len(rows) == 3 * len(CELLS)
    assert sorted(rows["run_id"].unique()) == ["run-0000", "run-0001", "run-0002"]
    res = invoke("history", "changes", "--history", h)
    assert "3 |" in res.output.split("Detectable steps")[1], res.output  # three runs in each series
