"""The history store (harness/history/store.py): two writers at once lose nothing, a torn, foreign or newer
schema's file is named and skipped while the rest stays readable, a run added twice is kept once (two `history
add` of it at once: added by one, the other says it is there), and a run whose commit cannot be placed still
lands with the reason.

    pytest -q tests/unit/history/test_store.py        # a few seconds
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
from click.testing import CliRunner

from harness.cli.main import cli
from harness.history import store, synthetic
from harness.history.rows import SCHEMA_VERSION, run_rows
from helpers import ROOT

CELLS = ["resnet50-tiny:ddp", "bert-base-tiny:bsp-a2a", "resnet50-tiny:wfbp-a2a"]

WRITER = """
import sys
from harness.history import store, synthetic
from harness.history.rows import SCHEMA_VERSION, run_rows
template = run_rows(synthetic.run_tables("t", {c: [0.1] * 5 for c in sys.argv[2].split(",")}))
for rows in synthetic.scaled_batches(template, runs=int(sys.argv[3]), iters=5, name=sys.argv[4]):
    store.append(rows, sys.argv[1])
"""


def test_two_writers_appending_at_once_lose_nothing_and_duplicate_nothing(tmp_path):
    history, runs = tmp_path / "history", 40
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(history), ",".join(CELLS), str(runs), name],
            cwd=ROOT,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name in ("job-a", "job-b")
    ]
    for p in procs:
        assert p.wait(timeout=120) == 0, p.stderr.read()
    rows, problems = store.read(history)
    assert problems == []
    assert len(store.files(history)) == 2 * runs
    assert len(rows) == 2 * runs * len(CELLS)
    assert not rows.duplicated(["run_key", "cell_key"]).any()
    assert set(rows["run_id"].str[:5]) == {"job-a", "job-b"}


def test_a_torn_and_a_foreign_file_are_named_and_skipped_and_the_rest_read(tmp_path):
    history = tmp_path / "history"
    for t in synthetic.series_runs(3, CELLS):
        store.append(run_rows(t), history)
    good = store.files(history)
    torn = store.runs_dir(history) / "torn.parquet"
    torn.write_bytes(good[0].read_bytes()[: good[0].stat().st_size // 2])
    foreign = store.runs_dir(history) / "foreign.parquet"
    pd.DataFrame({"x": [1, 2]}).to_parquet(foreign)
    rows, problems = store.read(history)
    assert len(rows) == 3 * len(CELLS)
    assert len(problems) == 2 and all(len(p.splitlines()) == 1 for p in problems)
    assert any(str(torn) in p for p in problems) and any(
        str(foreign) in p and "not a history file" in p for p in problems
    )
    res = CliRunner().invoke(cli, ["history", "changes", "--history", str(history)])
    assert res.exit_code == 0, res.output
    assert res.stderr.count("warning: skipped") == 2 and "torn.parquet" in res.stderr
    assert f"over {len(CELLS)} series, {3 * len(CELLS)} cell-runs" in res.stdout  # rows counted as what they are


def test_a_file_torn_past_its_footer_and_a_newer_schemas_file_are_named_once_and_skipped(tmp_path):
    """The dataset's read fails on a page torn behind a sound footer, and finds rows of a newer schema, without
    saying which file: each is found, named in one line, and the rest read (with a series filter too)."""
    history = tmp_path / "history"
    for t in synthetic.series_runs(3, CELLS):
        store.append(run_rows(t), history)
    good = store.files(history)
    data = bytearray(good[0].read_bytes())
    data[4:60] = b"\xff" * 56  # the first page's header, right after the magic bytes
    torn = store.runs_dir(history) / "torn.parquet"
    torn.write_bytes(bytes(data))
    newer = store.runs_dir(history) / "newer.parquet"
    run_rows(synthetic.series_runs(1, CELLS, first=3)[0]).assign(schema_version=SCHEMA_VERSION + 1).to_parquet(
        newer, index=False
    )
    rows, problems = store.read(history)
    assert len(rows) == 3 * len(CELLS) and set(rows["schema_version"]) == {SCHEMA_VERSION}
    assert len(problems) == 2 and all(len(p.splitlines()) == 1 for p in problems)
    assert any(str(torn) in p and "is torn" in p for p in problems)
    assert any(str(newer) in p and "newer ddlbench" in p for p in problems)
    one = rows["series"].iloc[0]
    some, again = store.read(history, columns=["run_key", "samples"], series={one})
    assert len(some) == 3 and set(some["series"]) == {one} and again == problems


def test_history_add_keeps_a_run_once_and_lands_a_run_without_a_commit(tmp_path):
    (no_commit,) = synthetic.series_runs(1, CELLS, commits=[""])
    (elsewhere,) = synthetic.series_runs(1, CELLS, first=1)
    a = synthetic.write_run_dir(no_commit, tmp_path / "a")
    b = synthetic.write_run_dir(elsewhere, tmp_path / "b")
    history = tmp_path / "history"
    res = CliRunner().invoke(cli, ["history", "add", str(a), str(b), "--history", str(history), "--repo", str(ROOT)])
    assert res.exit_code == 0, res.output
    assert "no commit; the run recorded no commit" in res.output
    assert "is not in the history of" in res.output
    again = CliRunner().invoke(cli, ["history", "add", str(a), "--history", str(history)])
    assert again.exit_code == 0 and "already in" in again.output
    rows, _ = store.read(history)
    assert len(rows) == 2 * len(CELLS)
    assert set(rows["commit_depth"]) == {-1} and rows["commit_reason"].str.len().gt(0).all()


def _waiting_for_a_lock(pids) -> set[int]:
    """Those of `pids` blocked in flock(2) (lines "N: -> FLOCK ... PID ..." of /proc/locks)."""
    waiting = [line.split() for line in Path("/proc/locks").read_text().splitlines()]
    return {pid for pid in pids if any(f[1] == "->" and str(pid) in f for f in waiting)}


def test_two_history_adds_of_one_run_at_once_add_it_once_and_the_second_says_so(tmp_path):
    run = synthetic.write_run_dir(synthetic.series_runs(1, CELLS)[0], tmp_path / "run")
    history = tmp_path / "history"
    argv = [sys.executable, "-m", "harness.cli.main", "history", "add", str(run), "--history", str(history)]
    with store.adding(history):  # both start, read nothing yet, and wait here: then they go one after the other
        procs = [
            subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for _ in range(2)
        ]
        deadline = time.monotonic() + 60
        while _waiting_for_a_lock(p.pid for p in procs) != {p.pid for p in procs}:
            assert all(p.poll() is None for p in procs), [p.communicate() for p in procs]
            assert time.monotonic() < deadline, "the adds never waited for the folder"
            time.sleep(0.05)
    said = sorted(p.communicate(timeout=120)[0].strip() for p in procs)
    assert [p.returncode for p in procs] == [0, 0], said
    assert said[0].startswith(f"{run}: added {len(CELLS)} cells to {history}"), said
    assert said[1] == f"{run}: already in {history} (nothing added)", said
    assert len(store.files(history)) == 1 and len(store.read(history)[0]) == len(CELLS)
