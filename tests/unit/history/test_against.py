"""The gate against the history (`ddlbench compare --history DIR CURRENT...`, harness/history/against.py): the
gate's statuses and exit codes against each cell's latest stable segment, `--fail-on confirmed`, a cell on a
new environment incomparable, and bad input as one line with exit status 2.

    pytest -q tests/unit/history/test_against.py        # a few seconds
"""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from harness.cli.main import cli
from harness.history import store, synthetic
from harness.history.rows import run_rows

CELLS = ["resnet50-tiny:ddp", "bert-base-tiny:bsp-a2a"]


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


@pytest.fixture
def history(tmp_path):
    h = tmp_path / "history"
    for t in synthetic.series_runs(12, CELLS, spread=0.01, seed=1):
        store.append(run_rows(t), h)
    return h


def _current(tmp_path, name, steps=None, env=None, first=12, runs=1):
    made = synthetic.series_runs(runs, CELLS, spread=0.01, steps=steps, seed=9, first=first, env=env)
    return [synthetic.write_run_dir(t, tmp_path / f"{name}-{k}") for k, t in enumerate(made)]


def test_a_run_like_the_history_passes_and_a_20_percent_slower_cell_fails(tmp_path, history):
    (same,) = _current(tmp_path, "same")
    res = invoke("compare", "--history", history, same)
    assert res.exit_code == 0, res.output
    assert "| same |" in res.output or "same" in res.output
    (slow,) = _current(tmp_path, "slow", steps={CELLS[0]: (0, -0.20)})
    res = invoke("compare", "--history", history, slow)
    assert res.exit_code == 1, res.output
    assert res.output.count("worse") >= 1 and "bert-base-tiny" in res.output


def test_fail_on_confirmed_fails_on_an_open_confirmed_change_until_it_is_acknowledged(tmp_path, history):
    slow = _current(tmp_path, "slow", steps={CELLS[0]: (0, -0.05)}, runs=4)
    for run in slow[:3]:
        assert invoke("history", "add", run, "--history", history).exit_code == 0
    res = invoke("compare", "--history", history, slow[3], "--fail-on", "confirmed")
    assert res.exit_code == 1 and "Open confirmed changes" in res.output, res.output
    commit, series = res.output.split("% at ")[1].split(" (series ")
    (history / "annotations.yaml").write_text(
        f"version: 1\nchanges:\n- series: {series.split(')')[0]}\n  commit: "
        f"{commit}\n  state: acknowledged\n  reason: known, issue 99\n"
    )
    res = invoke("compare", "--history", history, slow[3], "--fail-on", "confirmed")
    assert "Open confirmed changes" not in res.output, res.output
    assert res.exit_code == 0, res.output  # 5% is within the gate's factor: same


def test_a_cell_on_a_new_environment_is_incomparable_not_worse(tmp_path, history):
    (other,) = _current(tmp_path, "other", env={"cpu_model": "another cpu"}, steps={CELLS[0]: (0, -0.3)})
    res = invoke("compare", "--history", history, other)
    assert "incomparable" in res.output and "cpu_model: synthetic cpu -> another cpu" in res.output, res.output
    assert "worse" not in res.output.split("|---")[-1]
    assert res.exit_code == 1  # nothing compared: a gate that judged nothing must not pass


@pytest.mark.parametrize(
    "args, words",
    [
        (["compare", "only-one"], "needs a BASELINE"),
        (["history", "changes", "--history", "nowhere"], "holds no history"),
        (["history", "add", "nowhere", "--history", "h"], "neither a run directory"),
        (["history", "alarms"], "needs the noise"),
        (["history", "report", "--history", "nowhere", "-o", "x.html"], "holds no history"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path, monkeypatch, args, words):
    monkeypatch.chdir(tmp_path)
    res = invoke(*args)
    assert res.exit_code == 2, res.output
    assert words in res.output and len(res.output.strip().splitlines()) == 1, res.output


def test_history_calibrate_is_the_old_name_of_history_alarms(tmp_path):
    """`history calibrate` (users' CI calls it; "calibrate" is now the stack fit only, docs/ARCHITECTURE.md,
    "Glossary") says on one stderr line that it is `history alarms`, then does the same, into its old files."""
    args = ["--spread", "0.02", "--series", "10", "--points", "30"]
    new = invoke("history", "alarms", *args, "-o", tmp_path / "new")
    old = invoke("history", "calibrate", *args, "-o", tmp_path / "old")
    assert new.exit_code == 0 and old.exit_code == 0, (new.output, old.output)
    assert new.stderr == "" and old.stderr == "ddlbench history calibrate is now named ddlbench history alarms\n"
    table = lambda text: [line for line in text.splitlines() if line.startswith("|")]  # the rates, not the time
    assert table(old.stdout) == table(new.stdout) == table((tmp_path / "new" / "alarms.md").read_text())
    assert table((tmp_path / "old" / "calibrate.md").read_text()) == table(new.stdout)
    rates = lambda path: json.loads(path.read_text())["cases"]
    assert rates(tmp_path / "old" / "calibrate.json") == rates(tmp_path / "new" / "alarms.json")
    listed = invoke("history", "--help").output
    assert "alarms" in listed and "calibrate" not in listed
