"""Faults end cells, not sweeps (DESIGN sections 4 and 8): a crashed, hung or killed rank fails its
cell within the cell's timeout, the reason and log tail are recorded, earlier rows survive, and
`--resume` runs only what is missing (`--retry-failed`: and the failed cells)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pandas as pd
import pytest

from harness.cell import CellSpec, resolve
from harness.execute import execute_cell, run_cells
from harness.results import store

pytestmark = pytest.mark.slow

TINY = dict(workload="resnet50-tiny", workers=2, warmup=1, iters=3, device="cpu", timeout_s=120)


def _cell(scheme="wfbp-a2a", **kw):
    return resolve(CellSpec(scheme=scheme, **{**TINY, **kw}))


def test_crash_and_hang_fail_their_cells_and_keep_the_rest(tmp_path, monkeypatch):
    run = tmp_path / "run"
    good = _cell("bsp-a2a")
    run_cells([good], run, "t", progress=False)

    monkeypatch.setenv("DDLBENCH_FAULT", "crash:1:2")
    t0 = time.monotonic()
    crashed = execute_cell(_cell("wfbp-a2a"), run, "t")
    assert crashed["status"] == "failed" and "rank 1 died (exit code 17)" in crashed["reason"]
    assert "injected fault: crash" in crashed["log_tail"]
    assert time.monotonic() - t0 < 120

    monkeypatch.setenv("DDLBENCH_FAULT", "hang:0:1")
    t0 = time.monotonic()
    hung = execute_cell(_cell("mgwfbp", timeout_s=25), run, "t")
    took = time.monotonic() - t0
    assert hung["status"] == "failed" and "timed out after 25 s" in hung["reason"]
    assert 25 <= took < 60, took

    s = pd.read_parquet(run / "summary.parquet")
    assert len(s) == 3
    assert s.set_index("scheme").loc["bsp-a2a", "status"] == "ok"
    assert (pd.read_parquet(run / "raw.parquet")["cell_id"] == good.cell_id).all()
    assert not list(run.glob("**/.*.tmp*")), "temporary files left behind"


def test_worker_killed_from_outside(tmp_path):
    run = tmp_path / "run"
    cell = _cell("bytescheduler-a2a", iters=400)
    d = store.cell_dir(run, cell.cell_id)

    def rank1_pid():
        for proc in Path("/proc").iterdir():
            try:
                if str(d.resolve()) in (proc / "cmdline").read_bytes().decode(errors="replace") and \
                        b"RANK=1" in (proc / "environ").read_bytes().split(b"\0"):
                    return int(proc.name)
            except (OSError, ValueError):
                continue
        return None

    def kill_rank1_when_training():
        deadline = time.monotonic() + 100
        while time.monotonic() < deadline:
            pid = rank1_pid()
            if pid and (d / "rank1.log").exists():
                time.sleep(3)  # let it get into the timed loop
                os.kill(pid, signal.SIGKILL)
                return
            time.sleep(0.2)

    killer = threading.Thread(target=kill_rank1_when_training)
    killer.start()
    row = execute_cell(cell, run, "t")
    killer.join()
    assert row["status"] == "failed"
    assert "rank 1 died (signal 9)" in row["reason"]


def test_interrupted_sweep_resumes_only_missing_cells(tmp_path):
    sweep = tmp_path / "s.yaml"
    sweep.write_text("name: resume\nworkloads: [resnet50-tiny]\nschemes: [bsp-a2a, wfbp-a2a]\n"
                     "workers: [2]\nwarmup: 1\niters: 3\ndevice: cpu\ntimeout_s: 120\n")
    run = tmp_path / "run"
    proc = subprocess.Popen([sys.executable, "-m", "harness.cli", "sweep", str(sweep), "--output", str(run),
                             "--no-progress"], start_new_session=True, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 150
    while time.monotonic() < deadline and len(store.finished_cells(run) if run.exists() else ()) < 2:
        time.sleep(0.2)  # wait until the baseline and the first scheme cell are recorded
    os.killpg(proc.pid, signal.SIGKILL)  # the whole sweep dies mid-cell, workers and all
    proc.wait()
    before = store.finished_cells(run)
    assert len(before) == 2, before
    stamps = {c: (store.cell_dir(run, c) / "summary.parquet").stat().st_mtime_ns for c in before}

    from click.testing import CliRunner

    from harness.cli import cli

    res = CliRunner().invoke(cli, ["sweep", str(sweep), "--output", str(run), "--resume", "--no-progress"])
    assert res.exit_code == 0, res.output
    after = store.finished_cells(run)
    assert len(after) == 3 and before < after
    for c, t in stamps.items():  # finished cells were not run again
        assert (store.cell_dir(run, c) / "summary.parquet").stat().st_mtime_ns == t
    s = pd.read_parquet(run / "summary.parquet")
    assert (s["status"] == "ok").all() and len(s) == 3


def test_retry_failed_reruns_only_the_failed_cells(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from harness.cli import cli

    sweep = tmp_path / "s.yaml"
    sweep.write_text("name: retry\nworkloads: [resnet50-tiny]\nschemes: [bsp-a2a]\nworkers: [2]\nwarmup: 1\n"
                     "iters: 3\ndevice: cpu\ntimeout_s: 120\n")
    run = tmp_path / "run"
    argv = ["sweep", str(sweep), "--output", str(run), "--no-progress"]
    monkeypatch.setenv("DDLBENCH_FAULT", "crash:1:2")  # rank 1 of the 2-worker cell; the baseline has no rank 1
    assert CliRunner().invoke(cli, argv).exit_code == 0
    s = pd.read_parquet(run / "summary.parquet").set_index("scheme")
    assert s.loc["bsp-a2a", "status"] == "failed" and s.loc["local", "status"] == "ok"
    local_part = store.cell_dir(run, s.loc["local", "cell_id"]) / "summary.parquet"
    stamp = local_part.stat().st_mtime_ns
    monkeypatch.delenv("DDLBENCH_FAULT")

    res = CliRunner().invoke(cli, ["sweep", str(sweep), "--retry-failed", "--no-progress"])
    assert res.exit_code == 2 and "--resume" in res.output
    assert CliRunner().invoke(cli, argv + ["--resume"]).exit_code == 0  # plain resume: a failure is a result
    assert pd.read_parquet(run / "summary.parquet").set_index("scheme").loc["bsp-a2a", "status"] == "failed"

    res = CliRunner().invoke(cli, argv + ["--resume", "--retry-failed"])
    assert res.exit_code == 0, res.output
    s = pd.read_parquet(run / "summary.parquet").set_index("scheme")
    assert (s["status"] == "ok").all() and len(s) == 2
    assert local_part.stat().st_mtime_ns == stamp  # the measured cell was not run again
