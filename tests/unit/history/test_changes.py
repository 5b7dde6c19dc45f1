"""Change points over a history (harness/history/scan.py, detect.py, annotations.py): a step injected at one
commit of a real git repository is found at that commit with the range to bisect, and confirmed after two more
runs; an environment change starts a new series and is never a regression; a change triaged as expected is no
longer open and resets the reference; malformed triage is a one-line error, exit 2.

    pytest -q tests/unit/history/test_changes.py        # a few seconds
"""

from __future__ import annotations

import subprocess

import pytest
from click.testing import CliRunner

from harness.cli.main import cli
from harness.history import scan as scan_module
from harness.history import store, synthetic
from harness.history.rows import run_rows
from harness.history.scan import scan

CELLS = ["resnet50-tiny:ddp", "bert-base-tiny:bsp-a2a"]
SLOWED = CELLS[0]
STEP_AT = 20


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    """A git repository of 30 commits on one first-parent chain; its shas, oldest first."""
    root = tmp_path_factory.mktemp("repo")
    git = ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run([*git, "init", "-q"], check=True)
    for i in range(30):
        subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", f"c{i}"], check=True)
    out = subprocess.run([*git, "rev-list", "--reverse", "--first-parent", "HEAD"], capture_output=True, text=True)
    return root, out.stdout.split()


def _history(tmp_path, repo, runs: int, steps=None, **kw):
    root, shas = repo
    history = tmp_path / "history"
    for t in synthetic.series_runs(runs, CELLS, spread=0.01, steps=steps, commits=shas, seed=3, **kw):
        store.append(run_rows(t, repo=root), history)
    return history


def _changes(history):
    found = scan(history)
    return found, found.changes[found.changes["kind"] == "change"]


def test_a_step_is_found_at_its_commit_and_confirmed_after_two_more_runs(tmp_path, repo):
    _, shas = repo
    history = _history(tmp_path, repo, STEP_AT, steps={SLOWED: (STEP_AT, -0.10)})
    assert _changes(history)[1].empty  # no step yet: nothing found in 20 unchanged runs
    root = repo[0]
    for k, t in enumerate(
        synthetic.series_runs(
            3, CELLS, spread=0.01, steps={SLOWED: (STEP_AT, -0.10)}, commits=shas, seed=4, first=STEP_AT
        )
    ):
        store.append(run_rows(t, repo=root), history)
        _found, ch = _changes(history)
        if k == 0:  # one run at the new level is an outlier until a second agrees
            assert ch.empty
            continue
        assert len(ch) == 1, ch
        c = ch.iloc[0]
        assert c["cell"].startswith("resnet50-tiny ddp") and c["first_bad"] == shas[STEP_AT]
        assert c["last_good"] == shas[STEP_AT - 1]
        assert c["bisect"] == f"git bisect start {shas[STEP_AT][:12]} {shas[STEP_AT - 1][:12]}"
        assert -0.12 < c["size"] < -0.08 and c["size_low"] <= c["size"] <= c["size_high"]
        assert bool(c["confirmed"]) == (k == 2), (k, c.to_dict())
        assert c["state"] == "open"
    res = CliRunner().invoke(cli, ["history", "changes", "--history", str(history)])
    assert res.exit_code == 0 and "open (confirmed)" in res.output and "git bisect start" in res.output


def test_an_environment_change_starts_a_new_series_and_is_not_a_regression(tmp_path, repo):
    history = _history(tmp_path, repo, 15)
    root, shas = repo
    for t in synthetic.series_runs(
        12, CELLS, spread=0.01, commits=shas, seed=5, first=15, env={"cpu_model": "a slower cpu"}, level_s=0.13
    ):
        store.append(run_rows(t, repo=root), history)
    found, ch = _changes(history)
    assert ch.empty, ch  # 30% slower on the new machine: no change point
    env = found.changes[found.changes["kind"] == "environment"]
    assert len(env) == len(CELLS) and (env["state"] == "environment").all()
    assert env["detail"].str.contains("cpu_model: synthetic cpu -> a slower cpu").all()
    assert found.series["runs"].tolist() == [15, 15, 12, 12]


def test_an_expected_change_is_not_open_and_resets_the_reference(tmp_path, repo):
    _, shas = repo
    history = _history(tmp_path, repo, STEP_AT + 2, steps={SLOWED: (STEP_AT, -0.10)})
    found, ch = _changes(history)
    (c,) = ch.itertuples()
    assert not c.confirmed and c.state == "open"
    assert found.series.set_index("series").loc[c.series, "stable_from"] == 0  # awaiting: the reference stays
    (history / "annotations.yaml").write_text(
        f"version: 1\nchanges:\n- series: {c.series}\n  commit: "
        f"{shas[STEP_AT][:10]}\n  state: expected\n  reason: bf16 now\n"
    )
    found, ch = _changes(history)
    assert ch["state"].tolist() == ["expected"] and ch["reason"].tolist() == ["bf16 now"]
    assert found.series.set_index("series").loc[c.series, "stable_from"] == STEP_AT
    res = CliRunner().invoke(cli, ["history", "changes", "--history", str(history)])
    assert "0 open change(s)" in res.output


@pytest.mark.parametrize(
    "text, words",
    [
        ("version: 1\nchanges:\n- series: abc\n  commit: 1234567\n  state: fixed\n  reason: x\n", "not one of"),
        ("version: 1\nchanges:\n- series: abc\n  commit: 1234567\n  state: expected\n", "has no reason"),
        ("version: 1\nchanges:\n- series: abc\n  commit: 12\n  state: expected\n  reason: x\n", "too short"),
        ("changes: [\n", "not valid YAML"),
        ("changes: []\n", "version: 1"),
    ],
)
def test_malformed_annotations_are_one_line_errors(tmp_path, repo, text, words):
    history = _history(tmp_path, repo, 3)
    (history / "annotations.yaml").write_text(text)
    res = CliRunner().invoke(cli, ["history", "changes", "--history", str(history)])
    assert res.exit_code == 2 and words in res.output and len(res.output.strip().splitlines()) == 1, res.output


def test_only_series_with_new_runs_are_searched_again(tmp_path, repo, monkeypatch):
    root, shas = repo
    history = _history(tmp_path, repo, 12)
    scan(history)
    searched = []
    real = scan_module.candidates
    monkeypatch.setattr(scan_module, "candidates", lambda m, k: searched.append(len(m)) or real(m, k))
    scan(history)
    assert searched == []  # nothing new: every series' result from .cache/series.json
    (new,) = synthetic.series_runs(1, CELLS[:1], spread=0.01, commits=shas, seed=9, first=12)
    store.append(run_rows(new, repo=root), history)
    scan(history)
    assert searched == [13]  # the one series with a new run, and only it
