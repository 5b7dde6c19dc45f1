"""Warm ranks (docs/ARCHITECTURE.md, "Warm ranks"): a cell's ranks forked by the pre-imported zygote
(harness/warm/) are real ranks. Real processes throughout, no mock of the fork:

- a 2-rank ddp cell whose ranks a WarmPool spawned completes under the spawner's own supervision
  (harness/spawner/ranks._watch, _kill: WarmProc is a drop-in for Popen there), lossless, with `startup_s`; a
  second cell from the same pool too;
- a rank SIGKILLed mid-cell fails the cell (its WarmProc says signal 9), the other ends by killpg;
- the zygote SIGKILLed: every running WarmProc reports -9, the pool says it is dead, nothing is left;
- the driver SIGKILLed: no zygote and no rank remain 10 s later;
- a forked rank runs with the thread counts its cell and environment ask for, as a fresh one would;
- a rank placed in a network namespace runs in it (root);
- `startup_s` reaches the summary row, and a result without it (an older run) still summarises.
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import tempfile
import threading
import time
import uuid
from pathlib import Path

import pandas as pd
import psutil
import pytest
import torch

from harness.contracts.cell import CellSpec
from harness.contracts.placement import Placement
from harness.core.errors import CellFailed
from harness.experiment.cells import resolve
from harness.procs.argv import PACKAGE_ROOT, WORKER_MODULE, python_argv
from harness.procs.env import base_env
from harness.procs.ports import free_port
from harness.results.summarize import add_scaling, summary_row
from harness.spawner import cell as spawner_cell
from harness.spawner import ranks as spawner_ranks
from harness.warm.client import DIR_PREFIX, LOST, PoolDead, WarmPool, remove_stale_dirs
from helpers import TESTS, live_children

pytestmark = pytest.mark.slow

TESTS = str(TESTS)
CELL = dict(
    workload="bert-base-tiny",
    scheme="ddp",
    workers=2,
    device="cpu",
    batch=2,
    seq_len=16,
    warmup=1,
    iters=2,
    timeout_s=120,
)

WARM_SESSION = False
"""These tests start and count zygotes themselves: no module-wide zygote (tests/conftest.py)."""


@pytest.fixture(scope="module")
def pool():
    with WarmPool() as p:
        print(f"\nzygote ready in {p.ready_s:.2f} s; preloaded {p.preloaded}; threads {p.zygote_threads}")
        yield p


def spawn_cell(pool: WarmPool, cell: CellSpec, cell_dir: Path, extra: dict | None = None) -> list:
    """The local launcher's rank loop (harness/spawner/cell.launch_cell: the same environment per rank), with
    each rank forked by `pool` instead of started as `python -P -m harness.rank.worker`."""
    cell_dir.mkdir(parents=True, exist_ok=True)
    spec = cell_dir / "cell.json"
    spec.write_text(cell.to_json())
    placement = Placement(nodes=cell.nodes)
    world, port = cell.workers + cell.servers, free_port()
    per_node = -(-cell.workers // placement.nodes)
    placed_at = time.time()
    procs = []
    for r in range(world):
        env = spawner_cell._rank_env(cell, placement)
        env.update(
            RANK=str(r),
            WORLD_SIZE=str(world),
            LOCAL_RANK=str(r % per_node),
            LOCAL_WORLD_SIZE=str(min(per_node, world)),
            GROUP_WORLD_SIZE=str(placement.nodes),
            MASTER_ADDR=placement.master_addr,
            MASTER_PORT=str(port),
            NODE_RANK=str(r // per_node),
            DDLBENCH_PLACED_AT=repr(placed_at),
            **(extra or {}),
        )
        procs.append(
            pool.spawn(WORKER_MODULE, ["--cell", str(spec), "--out", str(cell_dir)], env, cell_dir / f"rank{r}.log")
        )
    return procs


def run_cell(pool: WarmPool, cell: CellSpec, cell_dir: Path) -> dict:
    procs = spawn_cell(pool, cell, cell_dir)
    try:
        spawner_ranks._watch(dict(enumerate(procs)), cell.timeout_s, cell_dir)
    finally:
        spawner_ranks._kill(procs)
    assert [p.returncode for p in procs] == [0] * len(procs), [p.returncode for p in procs]
    return json.loads((cell_dir / "result.json").read_text())


def test_warm_cells_complete_lossless_with_startup(pool, tmp_path, monkeypatch):
    monkeypatch.setenv("DDLBENCH_STEPS", "3")
    monkeypatch.setenv("DDLBENCH_DUMP_PARAMS", "1")
    cell = resolve(CellSpec(**CELL))
    took = []
    for name in ("first", "second"):
        t0 = time.monotonic()
        result = run_cell(pool, cell, tmp_path / name)
        took.append(time.monotonic() - t0)
        params = [torch.load(tmp_path / name / f"params.rank{r}.pt") for r in range(2)]
        for key, t in params[0].items():
            assert torch.equal(t, params[1][key]), f"{name}: ranks differ in {key}"
        startup = [rk["startup_s"] for rk in result["ranks"]]
        assert all(0 < s < 60 for s in startup), startup
        row = summary_row("r", cell, result, "sequence", took[-1])
        assert row["startup_s"] == startup[0]
        print(f"\n{name} warm cell: {took[-1]:.2f} s spawn to exit, startup_s per rank {startup}")
    # the second cell is a new process group: every rank a new process
    assert (tmp_path / "second" / "result.json").exists()


def test_startup_s_absent_without_placing_time_and_older_results_load(pool, tmp_path):
    cell = resolve(CellSpec(**{**CELL, "workers": 1, "scheme": "local"}))
    result = run_cell(pool, cell, tmp_path / "c")  # spawn_cell sets the variable: it is recorded
    assert result["ranks"][0]["startup_s"] > 0
    for rk in result["ranks"]:
        rk.pop("startup_s")  # as a run from before startup_s, or a launcher that does not set the variable
    row = summary_row("r", cell, result, "sequence", 1.0)
    assert math.isnan(row["startup_s"])
    old = pd.DataFrame([{k: v for k, v in row.items() if k != "startup_s"}])
    assert "startup_s" not in add_scaling(old).columns  # an older summary loads as it was


def test_rank_killed_mid_cell_fails_it_and_killpg_ends_the_other(pool, tmp_path):
    cell = resolve(CellSpec(**{**CELL, "iters": 100000}))  # still running when rank 1 is killed
    d = tmp_path / "killed"
    procs = spawn_cell(pool, cell, d)

    def kill_rank1():
        time.sleep(4.0)  # a warm rank is in its timed loop within a second or two
        os.kill(procs[1].pid, signal.SIGKILL)

    threading.Thread(target=kill_rank1, daemon=True).start()
    try:
        with pytest.raises(CellFailed, match=r"rank [01] died") as failed:  # rank 0 may lose its peer first
            spawner_ranks._watch(dict(enumerate(procs)), cell.timeout_s, d)
        print(f"\n{failed.value.reason}")
        assert procs[1].wait(timeout=10) == -signal.SIGKILL
    finally:
        spawner_ranks._kill(procs)  # os.killpg(pid, SIGKILL), as the launcher ends a cell
    assert procs[0].returncode not in (None, 0)
    assert not psutil.pid_exists(procs[0].pid) or psutil.Process(procs[0].pid).status() == psutil.STATUS_ZOMBIE


def test_zygote_killed_every_rank_reports_lost_and_the_pool_is_dead(tmp_path):
    pool = WarmPool()
    try:
        env = probe_env(marker="zygote-death")
        procs = [
            pool.spawn(
                "warm_probe", ["--report", str(tmp_path / f"p{i}.json"), "--sleep", "300"], env, tmp_path / f"p{i}.log"
            )
            for i in range(2)
        ]
        for i in range(2):
            wait_for(lambda i=i: (tmp_path / f"p{i}.json").exists(), 30)
        os.kill(pool.pid, signal.SIGKILL)
        assert [p.wait(timeout=10) for p in procs] == [LOST, LOST]
        wait_for(lambda: not pool.alive, 10)
        with pytest.raises(PoolDead):
            pool.spawn("warm_probe", ["--report", str(tmp_path / "x.json")], env, tmp_path / "x.log")
        wait_for(lambda: not any(psutil.pid_exists(p.pid) for p in procs), 10)
    finally:
        pool.close()


def test_driver_sigkill_leaves_no_zygote_and_no_rank(tmp_path):
    marker = f"warm-{uuid.uuid4().hex}"
    driver = f"""
import os, sys, time
from harness.warm.client import WarmPool
pool = WarmPool()
env = dict(os.environ, PYTHONPATH={TESTS!r} + os.pathsep + os.environ.get("PYTHONPATH", ""))
for i in range(2):
    pool.spawn("warm_probe", ["--report", {str(tmp_path)!r} + f"/p{{i}}.json", "--sleep", "300"], env,
               {str(tmp_path)!r} + f"/p{{i}}.log")
print("spawned", flush=True)
time.sleep(300)
"""
    env = dict(os.environ, WARM_PROBE_MARKER=marker)
    proc = subprocess.Popen([*python_argv(), "-c", driver], env=env, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "spawned"

        # found through the driver: setproctitle (which shows each rank's own command line) writes over
        # the environment /proc shows, the zygote's included
        def zygote():
            return next(iter(live_children(proc.pid, "harness.warm.zygote")), None)

        wait_for(lambda: zygote() is not None and len(zygote().children()) == 2, 30)
        started = [zygote(), *zygote().children()]

        def alive() -> list[int]:
            out = []
            for p in started:
                try:
                    if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                        out.append(p.pid)
                except psutil.Error:
                    pass
            return out

        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        t0 = time.monotonic()
        wait_for(lambda: not alive() and not marked(marker), 10)
        print(f"\nzygote and ranks gone {time.monotonic() - t0:.2f} s after the driver's SIGKILL")
        # nothing was left to remove the pool's folder: the next pool on this box does
        left = list(Path(tempfile.gettempdir()).glob(f"{DIR_PREFIX}{proc.pid}-*"))
        assert len(left) == 1 and (left[0] / "zygote.log").exists()
        assert left[0].name in remove_stale_dirs() and not left[0].exists()
    finally:
        for p in marked(marker):
            p.kill()
        if proc.poll() is None:
            proc.kill()


def test_forked_rank_uses_the_threads_its_cell_asks_for(pool, tmp_path):
    # the environment's count (torch reads OMP_NUM_THREADS at import; the zygote imported it without)
    for threads in (1, 2):
        env = probe_env(threads=threads)
        warm = pool.spawn("warm_probe", ["--report", str(tmp_path / "w.json")], env, tmp_path / "w.log")
        assert warm.wait(timeout=30) == 0, (tmp_path / "w.log").read_text()
        subprocess.run(
            [*python_argv(), "-m", "warm_probe", "--report", str(tmp_path / "f.json")], env=env, check=True, timeout=60
        )
        w, f = (json.loads((tmp_path / n).read_text()) for n in ("w.json", "f.json"))
        assert w["threads"] == f["threads"] == threads
        assert w["interop_threads"] == f["interop_threads"]
        assert (w["sigint"], w["sigterm"], w["sigchld"]) == (f["sigint"], f["sigterm"], f["sigchld"])
        assert w["sid"] == w["pid"] == w["pgid"] and w["ppid"] == pool.pid and w["cwd"] == os.getcwd()
        assert set(w["fds"]) == set(f["fds"]) == {"0", "1", "2"}, (w["fds"], f["fds"])  # nothing of the zygote's
    # a real CPU cell asking for 3 threads in an environment that says 1: the worker sets the cell's
    cell = resolve(CellSpec(**{**CELL, "workers": 1, "scheme": "local", "iters": 1, "threads": 3}))
    d = tmp_path / "cell"
    d.mkdir()
    (d / "cell.json").write_text(cell.to_json())
    warm = pool.spawn(
        "warm_probe",
        ["--report", str(tmp_path / "c.json"), "--worker", "--cell", str(d / "cell.json"), "--out", str(d)],
        probe_env(threads=1),
        d / "rank0.log",
    )
    assert warm.wait(timeout=60) == 0, (d / "rank0.log").read_text()
    report = json.loads((tmp_path / "c.json").read_text())
    assert report["worker_exit"] == 0 and (d / "result.json").exists()
    assert report["threads"] == 3


@pytest.mark.root
def test_rank_enters_the_network_namespace_it_is_given(pool, tmp_path):
    holder = subprocess.Popen(["unshare", "--net", "sleep", "60"])
    try:
        path = f"/proc/{holder.pid}/ns/net"
        wait_for(lambda: os.readlink(path) != os.readlink("/proc/self/ns/net"), 10)
        p = pool.spawn(
            "warm_probe", ["--report", str(tmp_path / "n.json")], probe_env(), tmp_path / "n.log", netns=path
        )
        assert p.wait(timeout=30) == 0, (tmp_path / "n.log").read_text()
        assert json.loads((tmp_path / "n.json").read_text())["netns"] == os.readlink(path)
        with pytest.raises(OSError, match=r"setns|No such file"):
            pool.spawn("warm_probe", [], probe_env(), tmp_path / "x.log", netns=str(tmp_path / "none"))
    finally:
        holder.kill()
        holder.wait()


def probe_env(threads: int = 1, marker: str = "") -> dict:
    env = base_env(threads, "local", {"WARM_PROBE_MARKER": marker})
    env["PYTHONPATH"] = os.pathsep.join([TESTS, PACKAGE_ROOT, *filter(None, [env.get("PYTHONPATH")])])
    return env


def marked(marker: str) -> list[psutil.Process]:
    """Processes whose environment carries WARM_PROBE_MARKER=marker."""
    out = []
    for p in psutil.process_iter():
        try:
            if p.environ().get("WARM_PROBE_MARKER") == marker and p.status() != psutil.STATUS_ZOMBIE:
                out.append(p)
        except (psutil.Error, OSError):
            continue
    return out


def wait_for(condition, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"not within {timeout_s} s"
        time.sleep(0.1)
