"""Faults across hosts (README, "Faults tried"): the history store's disk filling during `history add`, a testbed
link cut during a two-host cell, a link whose shaping changes under a two-host sweep. Each ends in one line
with the conventional exit status, keeps every row measured, leaves no process behind, and `--resume` (or the
same command again) completes once the fault is gone.

    pytest -q tests/integration/faults/test_faults_across_hosts.py      # as root (tmpfs, namespaces)
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

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
