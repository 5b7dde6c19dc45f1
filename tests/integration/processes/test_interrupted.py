"""Every command that runs cells ends one way when SIGTERM stops it while a cell runs (docs/ARCHITECTURE.md,
"Commands"; harness/cli/runs_cells.py): one line on stderr saying what was stopped and how to go on, no
traceback, exit status 128+15 as `ddlbench sweep` has it, and, where the command has a run directory, a run
that the line's command finishes. `sweep` itself: tests/integration/processes/test_faults.py; `testbed
measure`: tests/integration/testbed/test_testbed.py; a Slurm job's sweep (scancel):
tests/integration/slurm/test_slurm_sweep.py.

    pytest -q tests/integration/processes/test_interrupted.py      # about 2 minutes on 2 cores
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import psutil
import pytest
from click.testing import CliRunner

from harness.cli.main import cli
from helpers import rank_pids, stopped_in_one_line

pytestmark = pytest.mark.slow

HANG = "hang:1:1"
"""DDLBENCH_FAULT: rank 1 of every benchmark cell hangs at its first measured iteration, so the cell runs until
it is stopped (harness/rank/worker.py)."""
CELL = ("--workload", "resnet50-tiny", "--workers", "2", "--device", "cpu", "--warmup", "1", "--timeout", "120")
ADVISE = (
    "advise",
    *CELL,
    "--batch",
    "4",
    "--schemes",
    "ddp",
    "--grid",
    "default",
    "--top-k",
    "1",
    "--iters",
    "2",
    "--max-iters",
    "4",
    "--rounds",
    "0",
    "--no-progress",
    "--output",
    "{run}",
)
RECORDED = "the running cell's ranks were stopped and the cell recorded as interrupted"


@dataclass(frozen=True)
class Stop:
    """A command stopped by SIGTERM while it runs a cell."""

    argv: tuple
    """After `ddlbench`; {run} is the run directory."""
    running: str
    """The folder of the run directory whose rank logs show that a cell runs ("": a process of the command)."""
    says: str
    """What the one line says was stopped and how to go on ({run}: the run directory)."""
    again: tuple | None = None
    """The command that finishes the run (None: the command has no run directory)."""
    fault: str = ""
    """DDLBENCH_FAULT for the stopped command."""


CASES = {
    "run": Stop(
        ("run", *CELL, "--scheme", "bsp-a2a", "--iters", "3", "--output", "{run}"),
        "cells",
        f"{RECORDED}; finish with --resume --output {{run}}",
        again=("run", *CELL, "--scheme", "bsp-a2a", "--iters", "3", "--resume", "--output", "{run}"),
        fault=HANG,
    ),
    "advise": Stop(
        ADVISE,
        "cells",
        f"{RECORDED}; go on with the same command and --resume --output {{run}}",
        again=(*ADVISE, "--resume"),
        fault=HANG,
    ),
    "commbench": Stop(
        ("commbench", "--workers", "2", "--min-size", "32M", "--max-size", "64M", "--reps", "500", "--output", "{run}"),
        "commbench",
        "the commbench ranks were stopped and nothing was recorded; measure again with --output {run}",
        again=("commbench", "--workers", "2", "--max-size", "8K", "--reps", "1", "--output", "{run}"),
    ),
    "profile": Stop(
        ("profile", "resnet50-tiny", "--iters", "100000", "--concurrent", "2", "-o", "{run}/p.parquet"),
        "",
        "nothing was written; run it again",
    ),
}


def _ddlbench(argv: tuple, run: Path, fault: str = "") -> subprocess.Popen:
    env = (
        {**os.environ, "DDLBENCH_FAULT": fault}
        if fault
        else {k: v for k, v in os.environ.items() if k != "DDLBENCH_FAULT"}
    )
    return subprocess.Popen(
        [sys.executable, "-m", "harness.cli.main", *(a.format(run=run) for a in argv)],
        start_new_session=True,
        env=env,
        cwd=run.parent,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _wait_until_running(proc: subprocess.Popen, run: Path, folder: str) -> None:
    """Until two ranks of a cell (or, for folder "", a child process of the command) live, then a little more."""
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()
        running = len(rank_pids(run / folder)) >= 2 if folder else psutil.Process(proc.pid).children(recursive=True)
        if running:
            time.sleep(2.0)
            return
        time.sleep(0.2)
    pytest.fail("no cell ever ran")


@pytest.mark.parametrize("name", sorted(CASES))
def test_sigterm_while_a_cell_runs_is_one_line_and_the_run_goes_on(tmp_path, name):
    case, run = CASES[name], tmp_path / "run"
    proc = _ddlbench(case.argv, run, case.fault)
    try:
        _wait_until_running(proc, run, case.running)
        children = psutil.Process(proc.pid).children(recursive=True)
        proc.send_signal(signal.SIGTERM)  # what `timeout`, a CI cancel or the end of a Slurm job sends
        _, err = proc.communicate(timeout=120)
    finally:  # a failure above must not leave the command running (the testbed case would hold the testbed)
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate(timeout=30)
    line = stopped_in_one_line(err, proc.returncode)
    assert line.endswith(case.says.format(run=run)), line
    _gone, alive = psutil.wait_procs(children, timeout=15)
    assert not alive, f"processes outlived the stopped command: {alive}"
    if case.again is None:
        assert not any(run.glob("*.parquet")), "a stopped command wrote its output"
        return
    finish = CliRunner().invoke(cli, [a.format(run=run) for a in case.again])  # here: ranks from the warm zygote
    assert finish.exit_code == 0, finish.output
    if name == "commbench":
        assert set(pd.read_parquet(run / "commbench.parquet")["size_bytes"]) == {4096, 8192}
    else:
        assert (pd.read_parquet(run / "summary.parquet")["status"] == "ok").all()
