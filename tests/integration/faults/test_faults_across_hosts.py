"""Faults across hosts (README, "Faults tried"): the history store's disk filling during `history add`, a testbed
link cut during a two-host cell, a link whose shaping changes under a two-host sweep. Each ends in one line
with the conventional exit status, keeps every row measured, leaves no process behind, and `--resume` (or the
same command again) completes once the fault is gone.

    pytest -q tests/integration/faults/test_faults_across_hosts.py      # as root (tmpfs, namespaces)
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import psutil
import pytest
import yaml

from harness.history import store, synthetic
from helpers import ROOT

CELLS = ["resnet50-tiny:ddp", "bert-base-tiny:bsp-a2a", "resnet50-tiny:wfbp-a2a"]


def _cli(*args, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "harness.cli.main", *map(str, args)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.fixture
def small_disk(tmp_path):
    """A 1 MiB tmpfs of its own, unmounted after (root)."""
    mount = tmp_path / "disk"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount)], check=True)
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def _fill(disk: Path, leave: int) -> Path:
    """Fill `disk` until `leave` bytes (rounded to pages) are free; the filler file, to remove later."""
    filler = disk / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT)
    try:
        while os.write(fd, b"\0" * 4096):
            pass
    except OSError:
        os.ftruncate(fd, max(0, os.fstat(fd).st_size - leave))
    finally:
        os.close(fd)
    return filler


@pytest.mark.root
def test_the_history_disk_filling_during_add_is_one_line_and_the_store_is_as_it_was(tmp_path, small_disk):
    first, second, third = synthetic.series_runs(3, CELLS)
    runs = [synthetic.write_run_dir(t, tmp_path / name) for t, name in zip((first, second, third), "abc")]
    history = small_disk / "history"
    added = _cli("history", "add", runs[0], "--history", history)
    assert added.returncode == 0, added.stderr
    before = {p.name: p.read_bytes() for p in store.files(history)}
    batch = max(len(b) for b in before.values())
    # room for one more batch and not two: the second run's batch lands, the third's does not, and the add
    # takes the second back so that the folder is as it was
    filler = _fill(small_disk, leave=batch + 4096)
    full = _cli("history", "add", runs[1], runs[2], "--history", history)
    lines = full.stderr.strip().splitlines()
    assert full.returncode == 2 and len(lines) == 1, (full.returncode, full.stdout, full.stderr)
    assert f"nothing added to {history} (it is as it was)" in lines[0], lines
    assert "No space left on device; free space on its disk" in lines[0], lines
    assert f"(it is as it was): {runs[2]}: " in lines[0], "the second run's batch did not land first"
    assert {p.name: p.read_bytes() for p in store.files(history)} == before
    assert sorted(p.name for p in store.runs_dir(history).iterdir()) == sorted(before), "a temporary was left"
    filler.unlink()
    again = _cli("history", "add", runs[1], runs[2], "--history", history)
    assert again.returncode == 0, again.stderr
    rows, problems = store.read(history)
    assert not problems and len(rows) == 3 * len(CELLS)


# -- the testbed: a link cut, a link reshaped -------------------------------------------------------------

CUT_TIMEOUT_S = 60
"""Each cell's timeout in the link tests: far above a cell's seconds of work, and what a cut cell waits."""


def _sweep_file(tmp_path: Path, name: str, schemes: list[str], iters: int) -> Path:
    path = tmp_path / f"{name}.yaml"
    body = {
        "name": name,
        "testbed": {"hosts": 2, "rate": "500mbit"},
        "workloads": ["resnet50-tiny"],
        "schemes": schemes,
        "workers": [2],
        "baseline": False,
        "warmup": 1,
        "iters": iters,
        "batch": 2,
        "timeout_s": CUT_TIMEOUT_S,
    }
    path.write_text(yaml.safe_dump(body))
    return path


def _start(*args) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "harness.cli.main", *map(str, args)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def _pids_in(ns: str) -> list[int]:
    out = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True).stdout
    return [int(p) for p in out.split()]


def _first_cell_running(sweep: subprocess.Popen, host: str, deadline_s: float = 120) -> None:
    """Wait until ranks run on `host` (their namespace holds processes), then a few seconds more, so that the
    cell is past its start."""
    deadline = time.monotonic() + deadline_s
    while not _pids_in(host):
        assert sweep.poll() is None, sweep.communicate()
        assert time.monotonic() < deadline, f"no rank started on {host} within {deadline_s:g} s"
        time.sleep(0.2)
    time.sleep(5)


def _left_behind(marker: str) -> list[str]:
    """Processes still alive whose command line names `marker` (the run directory: ranks, zygotes, servers),
    and any process left in the testbed's host namespaces."""
    left = []
    for p in psutil.process_iter(["pid", "cmdline", "status"]):
        cmd = " ".join(p.info["cmdline"] or [])
        if marker in cmd and p.info["status"] != psutil.STATUS_ZOMBIE:
            left.append(f"{p.info['pid']} {cmd}")
    return left + [f"{pid} in {ns}" for ns in ("ddlb-h0", "ddlb-h1") for pid in _pids_in(ns)]


def _link(action: str) -> None:
    subprocess.run(["ip", "-n", "ddlb-h1", "link", "set", "ddlb-eth0", action], check=True)


@pytest.mark.root
@pytest.mark.slow
def test_a_link_cut_during_a_two_host_cell_fails_it_naming_the_link_and_resume_completes(clean_machine, tmp_path):
    sweep_file = _sweep_file(tmp_path, "cut", ["ddp", "bsp-a2a"], iters=400)
    out = tmp_path / "cut-run"
    sweep = _start("sweep", sweep_file, "--output", out)
    try:
        _first_cell_running(sweep, "ddlb-h1")
        cut_at = time.monotonic()
        _link("down")
        stdout, stderr = sweep.communicate(timeout=4 * CUT_TIMEOUT_S)
        took = time.monotonic() - cut_at
    finally:
        if sweep.poll() is None:
            os.killpg(sweep.pid, signal.SIGKILL)
    assert sweep.returncode == 1, (stdout, stderr)  # failed cells, the sweep went on to its end
    summary = pd.read_parquet(out / "summary.parquet").sort_values("wall_s", ascending=False)
    assert len(summary) == 2 and (summary["status"] == "failed").all(), summary[["cell_id", "reason"]]
    cut, after = summary["reason"].tolist()
    print(f"\ncut cell ({summary['wall_s'].iloc[0]:.1f} s): {cut}\nnext cell: {after}\nsweep ended {took:.1f} s after")
    assert "host ddlb-h1's link changed during the cell (ddlb-eth0 in ddlb-h1 UP -> DOWN" in cut, cut
    assert "host ddlb-h1's link is down" in after and "at the cell's start" in after, after
    assert took < CUT_TIMEOUT_S + 30, "the cut cell outlived its timeout"
    assert not _left_behind(str(out)), _left_behind(str(out))

    _link("up")
    again = _cli("sweep", sweep_file, "--output", out, "--resume", "--retry-failed", timeout=600)
    assert again.returncode == 0, (again.stdout, again.stderr)
    summary = pd.read_parquet(out / "summary.parquet")
    assert len(summary) == 2 and (summary["status"] == "ok").all(), summary[["cell_id", "reason"]]
    assert not summary["reason"].str.contains("link").any(), summary["reason"].tolist()
    assert not _left_behind(str(out)), _left_behind(str(out))
