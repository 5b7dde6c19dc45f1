"""Warm ranks through the launchers (docs/ARCHITECTURE.md, "Warm ranks"): a sweep's ranks are forked from
one pre-imported zygote by default and started cold with `--cold` / `cold: true`; isolation holds. Real
sweeps, real processes:

- a warm sweep's rows say `rank_start` warm and carry `startup_s`; ranks end with identical parameters
  (lossless); the same sweep cold says cold; the environment table records `warm_ranks`;
- a rank SIGKILLed mid-cell in the warm pool fails that cell only, with its reason, and the next cell runs;
- `ddlbench sweep` SIGKILLed mid-cell leaves no zygote and no rank 10 s later.
"""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pandas as pd
import psutil
import pytest
import torch
import yaml

from harness.cli.entry import forks_here
from harness.experiment.dispatch import run_sweep_file
from harness.experiment.options import RunOptions
from harness.warm import spawn
from harness.warm.client import ZYGOTE_MODULE
from harness.warm.spawn import RankStart, netns_of, warm_ranks
from helpers import rank_pids

pytestmark = pytest.mark.slow
SWEEP = dict(
    name="warm",
    workloads=["bert-base-tiny"],
    schemes=["ddp", "bsp-a2a"],
    workers=[2],
    batch=2,
    seq_len=16,
    warmup=1,
    iters=3,
    baseline=False,
    timeout_s=180,
)

WARM_SESSION = False
"""These tests start and count zygotes themselves: no module-wide zygote (tests/conftest.py)."""


def _sweep(tmp_path: Path, **changes) -> Path:
    path = tmp_path / f"sweep-{uuid.uuid4().hex[:6]}.yaml"
    path.write_text(yaml.safe_dump({**SWEEP, **changes}))
    return path


def _zygotes(under: int | None = None) -> list[psutil.Process]:
    """The zygotes started by process `under` (default this test's) or its descendants."""
    out, under = [], os.getpid() if under is None else under
    for p in psutil.process_iter(["cmdline"]):
        try:
            if ZYGOTE_MODULE in " ".join(p.info["cmdline"] or []) and under in [a.pid for a in p.parents()]:
                out.append(p)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            pass
    return out


def test_netns_prefix_is_recognised_and_nothing_else():
    assert netns_of(("nsenter", "--net=/var/run/netns/h1", "--")) == "/var/run/netns/h1"
    assert netns_of(("ssh", "h1", "--")) is None and netns_of(()) is None
    rank = RankStart("harness.rank.worker", ("--cell", "c.json"), {}, ("nsenter", "--net=/x", "--"))
    assert rank.argv()[:3] == ["nsenter", "--net=/x", "--"] and rank.argv()[-2:] == ["--cell", "c.json"]


def test_warm_and_cold_sweeps_record_how_their_ranks_started(tmp_path, monkeypatch):
    monkeypatch.setenv("DDLBENCH_DUMP_PARAMS", "1")
    warm = run_sweep_file(_sweep(tmp_path), RunOptions(output=tmp_path / "warm", progress=False))
    s = pd.read_parquet(warm / "summary.parquet")
    assert list(s["status"]) == ["ok", "ok"] and list(s["rank_start"]) == ["warm", "warm"], s[["status", "reason"]]
    assert list(s["host_heap"]) == ["kept", "kept"]  # set in the forked rank, after the zygote's imports
    assert all(math.isfinite(x) and x > 0 for x in s["startup_s"])
    assert bool(pd.read_parquet(warm / "environment.parquet")["warm_ranks"].iloc[0])
    for cell_id in s["cell_id"]:  # lossless: every rank ends with the same parameters
        p0, p1 = (torch.load(warm / "cells" / cell_id / f"params.rank{r}.pt") for r in (0, 1))
        assert all(torch.equal(p0[k], p1[k]) for k in p0)
    monkeypatch.setenv("DDLBENCH_HOST_HEAP", "default")  # the user's way to measure glibc's defaults
    cold = run_sweep_file(_sweep(tmp_path, cold=True), RunOptions(output=tmp_path / "cold", progress=False))
    c = pd.read_parquet(cold / "summary.parquet")
    assert list(c["host_heap"]) == ["default", "default"]
    assert (
        list(c["rank_start"]) == ["cold", "cold"]
        and not pd.read_parquet(cold / "environment.parquet")["warm_ranks"].iloc[0]
    )
    print(f"\nstartup_s warm {list(s['startup_s'].round(2))}, cold {list(c['startup_s'].round(2))}")
    assert not _zygotes(), "the zygote outlived its sweep"


def test_a_rank_killed_mid_cell_fails_that_cell_only(tmp_path, monkeypatch):
    monkeypatch.setenv("DDLBENCH_FAULT", "hang:1:2:ddp")  # rank 1 of the ddp cell stops at iteration 2
    run_dir = tmp_path / "killed"
    killed = []

    def kill_the_hung_rank():
        deadline = time.monotonic() + 150
        while time.monotonic() < deadline and not killed:
            for log in run_dir.glob("cells/*.ddp.*/rank1.log"):
                if "injected fault: hang" in log.read_text(errors="replace"):
                    pid = rank_pids(log.parent, rank=1)[0]
                    assert psutil.Process(pid).ppid() in [z.pid for z in _zygotes()]  # forked, not started
                    os.kill(pid, signal.SIGKILL)
                    killed.append(pid)
            time.sleep(0.2)

    threading.Thread(target=kill_the_hung_rank, daemon=True).start()
    run_sweep_file(_sweep(tmp_path), RunOptions(output=run_dir, progress=False))
    s = pd.read_parquet(run_dir / "summary.parquet").set_index("scheme")
    assert killed, "the hung rank was never found among the zygote's children"
    assert s.loc["ddp", "status"] == "failed" and "died" in s.loc["ddp", "reason"], s["reason"]
    assert s.loc["bsp-a2a", "status"] == "ok" and s.loc["bsp-a2a", "rank_start"] == "warm"


def test_driver_sigkill_leaves_no_zygote_and_no_rank(tmp_path):
    marker = f"warm-launch-{uuid.uuid4().hex}"
    out = tmp_path / "run"
    env = {**os.environ, "DDLBENCH_TEST_MARKER": marker, "DDLBENCH_FAULT": "hang:0:1"}
    driver = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "harness.cli.main",
            "sweep",
            str(_sweep(tmp_path)),
            "--output",
            str(out),
            "--no-progress",
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )

    zygotes: list[int] = []

    def left() -> list[int]:
        """Ranks of the run (by their logs; a forked rank's /proc environment is not its own), the
        zygote (by the pid seen before the kill) and any process with the marker in its environment."""
        found = set(rank_pids(out)) | {
            z for z in zygotes if psutil.pid_exists(z) and psutil.Process(z).status() != psutil.STATUS_ZOMBIE
        }
        for p in psutil.process_iter():
            try:
                if p.pid != driver.pid and p.environ().get("DDLBENCH_TEST_MARKER") == marker:
                    found.add(p.pid)
            except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
                pass
        return sorted(found)

    try:
        deadline = time.monotonic() + 120
        while not any("injected fault" in p.read_text(errors="replace") for p in out.glob("cells/*/rank0.log")):
            assert time.monotonic() < deadline and driver.poll() is None, "the first cell never reached its hang"
            time.sleep(0.2)
        zygotes.extend(z.pid for z in _zygotes(driver.pid))
        assert zygotes and len(rank_pids(out)) == 2  # the zygote and the cell's two ranks
        driver.send_signal(signal.SIGKILL)
        driver.wait(timeout=10)
        t0 = time.monotonic()
        while left() and time.monotonic() - t0 < 10:
            time.sleep(0.2)
        assert not left(), f"still running 10 s after the driver's SIGKILL: {left()}"
    finally:
        for pid in left():
            os.kill(pid, signal.SIGKILL)
        if driver.poll() is None:
            driver.kill()


def test_a_warm_rank_shows_its_own_command_line(tmp_path, monkeypatch):
    monkeypatch.setenv("DDLBENCH_FAULT", "hang:0:1:ddp")
    titles = []

    def look():
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not titles:
            for log in (tmp_path / "t").glob("cells/*.ddp.*/rank0.log"):
                if "injected fault" in log.read_text(errors="replace"):
                    pid = rank_pids(log.parent, rank=0)[0]
                    titles.append(Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode())
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.2)

    threading.Thread(target=look, daemon=True).start()
    run_sweep_file(_sweep(tmp_path, schemes=["ddp"]), RunOptions(output=tmp_path / "t", progress=False))
    assert titles and "-m harness.rank.worker --cell" in titles[0] and str(tmp_path / "t") in titles[0], titles


def test_warm_blocks_nest_and_cold_wins_inside():
    with warm_ranks(True) as outer:
        with warm_ranks(True) as inner:
            assert inner.get() is outer.get()  # one zygote for an advise run's sweeps
        assert inner.pool is None and outer.pool.alive  # the inner block owned none: the zygote lives on
        with warm_ranks(False) as off:
            assert off is not outer and not off.enabled


def test_the_console_script_starts_the_zygote_early_only_where_ranks_fork_here():
    assert forks_here(["run", "--workload", "bert-base-tiny"], {}) and forks_here(["sweep", "s.yaml"], {})
    assert forks_here(["advise", "--workload", "w"], {})
    assert not forks_here(["run", "--cold"], {}) and not forks_here(["sweep", "s.yaml", "--help"], {})
    assert not forks_here(["report", "results/x"], {}) and not forks_here([], {})
    assert not forks_here(["sweep", "s.yaml"], {"SLURM_JOB_ID": "7"})  # the srun launcher forks on the nodes


def test_an_early_zygote_is_adopted_by_a_warm_run_and_closed_by_a_cold_one():
    spawn.start_early()
    [early] = spawn._early
    with warm_ranks(True) as block:
        assert block.pool is early and not spawn._early  # adopted: no second zygote
    assert not early.alive
    spawn.start_early()
    [early] = spawn._early
    with warm_ranks(False):
        assert not spawn._early and not early.alive  # a cold run forks nothing: it must not import beside it
