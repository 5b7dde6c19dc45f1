"""Every command ends one way when SIGINT (Ctrl-C) or SIGTERM (`timeout`, a CI cancel) stops it (docs/ARCHITECTURE.md,
"Commands"; harness/cli/main.py): one line on stderr naming the command and what to run again, exit status 128+N,
no traceback, never click's `Aborted!` and exit 1, which `compare` uses for "a cell is worse". Commands that run
cells, stopped while a cell runs: tests/integration/processes/test_interrupted.py.

    pytest -q tests/unit/cli/test_interrupt.py        # about 30 s on 2 cores
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.history import store, synthetic
from helpers import ROOT

SIGNALS = (signal.SIGINT, signal.SIGTERM)


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory) -> list[Path]:
    """Two runs of 4,000 synthetic cells: `compare` takes seconds over them (imports, reading, a test per cell)."""
    where = tmp_path_factory.mktemp("runs")
    cells = [f"w{i}:ddp" for i in range(4000)]
    return [synthetic.write_run_dir(t, where / t.path.name) for t in synthetic.series_runs(2, cells, iters=50)]


def _ddlbench(*argv) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "harness.cli.main", *map(str, argv)],
        cwd=ROOT,
        start_new_session=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _until(what, proc: subprocess.Popen, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while not what():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the command never got there"
        time.sleep(0.02)


def _catches_sigterm(pid: int) -> bool:
    """The command's own handler is in place (Python itself catches only SIGINT): the command line is parsed and
    the command about to run or running."""
    mask = next(line for line in Path(f"/proc/{pid}/status").read_text().splitlines() if line.startswith("SigCgt:"))
    return bool(int(mask.split()[1], 16) >> (signal.SIGTERM - 1) & 1)


def _waits_for_a_lock(pid: int) -> bool:
    """A blocked flock(2) of the process (a line "N: -> FLOCK ADVISORY WRITE PID ..." of /proc/locks)."""
    waiting = (line.split() for line in Path("/proc/locks").read_text().splitlines())
    return any(fields[1] == "->" and str(pid) in fields for fields in waiting)


def _stopped(proc: subprocess.Popen, sig: int) -> tuple[str, str]:
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + sig, (proc.returncode, out, err)
    assert "Aborted!" not in out + err and "Traceback" not in err, err
    return out, err


@pytest.mark.parametrize("sig", SIGNALS, ids=lambda s: signal.Signals(s).name)
def test_compare_stopped_says_so_in_one_line_and_exits_128_plus_n(two_runs, sig):
    proc = _ddlbench("compare", *two_runs)
    _until(lambda: _catches_sigterm(proc.pid), proc)
    out, err = _stopped(proc, sig)
    assert err.splitlines() == [
        f"error: interrupted by {signal.Signals(sig).name}: `ddlbench compare` stopped before it finished; run it again"
    ], err
    assert out == ""  # no table: a stopped gate says nothing about the cells


@pytest.mark.parametrize("sig", SIGNALS, ids=lambda s: signal.Signals(s).name)
def test_history_add_stopped_while_it_waits_its_turn_adds_nothing(tmp_path, sig):
    run = synthetic.write_run_dir(synthetic.series_runs(1, ["resnet50-tiny:ddp"])[0], tmp_path / "run")
    history = tmp_path / "history"
    with store.adding(history):  # another `history add` holds the folder: this one waits inside its command
        proc = _ddlbench("history", "add", run, "--history", history)
        _until(lambda: _waits_for_a_lock(proc.pid), proc)
        _, err = _stopped(proc, sig)
    assert err.splitlines() == [
        f"error: interrupted by {signal.Signals(sig).name}: `ddlbench history add` stopped "
        f"before it finished; run it again"
    ], err
    assert store.files(history) == []
