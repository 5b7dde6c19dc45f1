"""Warm ranks under Slurm, the parts that need no cluster (docs/ARCHITECTURE.md, "Warm ranks";
harness/launchers/srun/warm.py): the planned steps read back into tasks, each task's Slurm variables, a
shim style run in the rank, and a real zygote serving over TCP with its token, its inherited environment
and signals sent through it. The real-Slurm run (2 nodes, a rank killed mid-cell) is in
tests/integration/slurm/test_slurm_sweep.py.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time

import pytest

from harness.contracts.backend import recipe
from harness.contracts.cell import CellSpec
from harness.contracts.recipes.srun import SHIM_MODULE, Allocation, SrunRecipe
from harness.launchers.identity import from_environ
from harness.launchers.srun.context import SrunCellContext
from harness.launchers.srun.tasks import task_env, warm_tasks
from harness.procs.argv import WORKER_MODULE, python_argv, worker_argv
from harness.rank.srun_task import main as shim_main
from harness.warm.client import zygote_env
from harness.warm.connection import ZygoteConnection
from harness.warm.listen import TOKEN_VAR

ALLOC2 = Allocation("77", ("n1", "n2"), 2, (4, 4), here="n1")


def _cell(**over) -> CellSpec:
    base = dict(workload="resnet50-tiny", scheme="bsp-ps", workers=3, servers=2, nodes=2, device="cpu")
    return CellSpec(**{**base, **over})


def _plan(tmp_path, cell, style=None, rendezvous=None):
    """The steps as launch_cell_srun plans them: the cell's backend's srun recipe over the context."""
    ctx = SrunCellContext(
        cell, ALLOC2, tmp_path, "10.0.0.1", 24000, (*python_argv(), *worker_argv(tmp_path)), style, rendezvous
    )
    return recipe(cell.backend, SrunRecipe).plan(ctx)


def test_a_torch_cell_becomes_one_spawn_per_task_on_its_node(tmp_path):
    tasks = warm_tasks(_plan(tmp_path, _cell()))
    assert [(t.rank, t.host) for t in tasks] == [(0, "n1"), (1, "n1"), (2, "n2"), (3, "n1"), (4, "n2")]
    assert {t.module for t in tasks} == {WORKER_MODULE}
    assert tasks[0].args == ("--cell", str(tmp_path / "cell.json"), "--out", str(tmp_path))
    assert [t.log for t in tasks[:2]] == [str(tmp_path / "rank0.log"), str(tmp_path / "rank1.log")]


def test_a_shim_style_runs_in_the_rank_and_framework_launchers_stay_cold(tmp_path):
    [t0, *_] = warm_tasks(_plan(tmp_path, _cell(backend="deepspeed", scheme="ddp", servers=0)))
    assert t0.module == SHIM_MODULE and t0.args[:5] == ("torch", "--here", "--", "-m", WORKER_MODULE)
    cell = _cell(backend="horovod", scheme="wfbp-a2a", servers=0)
    assert warm_tasks(_plan(tmp_path, cell, style="horovodrun")) is None  # horovodrun starts its own ranks
    [h0, *_] = warm_tasks(_plan(tmp_path, cell, rendezvous=("10.0.0.9", 5555)))
    assert h0.args[0] == "horovod"
    assert warm_tasks(_plan(tmp_path, _cell(backend="byteps"))) is None  # its scheduler is not the worker


def test_each_task_gets_the_variables_srun_would_give_it(tmp_path):
    """The same rank, local rank, node and sizes from_environ reads from a real srun task (the
    tests/integration/slurm/test_slurm_sweep.py `_slurm_task` layout: 3 workers and 2 servers over n1, n2)."""
    tasks = warm_tasks(_plan(tmp_path, _cell()))
    seen = []
    for t in tasks:
        env = {"SLURM_JOB_ID": "77", "SLURMD_NODENAME": t.host, **task_env(t, ALLOC2)}
        d = from_environ(env)
        seen.append((d.rank, d.world_size, d.local_rank, d.local_world_size, d.node_rank, d.nodes, d.source))
        assert env["SLURM_STEP_TASKS_PER_NODE"] == "3,2" and env["SLURM_STEP_NODELIST"] == "n1,n2"
        assert (env["MASTER_ADDR"], env["MASTER_PORT"], env["DDLBENCH_RANK_START"]) == ("10.0.0.1", "24000", "warm")
    assert seen == [
        (0, 5, 0, 3, 0, 2, "slurm"),
        (1, 5, 1, 3, 0, 2, "slurm"),
        (2, 5, 0, 2, 1, 2, "slurm"),
        (3, 5, 2, 3, 0, 2, "slurm"),
        (4, 5, 1, 2, 1, 2, "slurm"),
    ]


def test_the_shim_here_runs_the_module_in_this_process(tmp_path, monkeypatch):
    (tmp_path / "probe_mod.py").write_text(
        "import json, os, sys\n"
        "def main(argv):\n"
        "    print(json.dumps({'argv': argv, 'rank': os.environ['RANK'], 'local': os.environ['LOCAL_RANK'],"
        " 'pid': os.getpid()}))\n"
        "    return 7\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    for k, v in {
        "SLURM_PROCID": "2",
        "SLURM_NTASKS": "3",
        "SLURM_NODEID": "1",
        "SLURM_LOCALID": "0",
        "SLURM_STEP_NUM_NODES": "2",
        "SLURM_STEP_TASKS_PER_NODE": "2,1",
        "MASTER_ADDR": "10.0.0.1",
        "MASTER_PORT": "24000",
    }.items():
        monkeypatch.setenv(k, v)
    for k in ("RANK", "LOCAL_RANK", "WORLD_SIZE"):
        monkeypatch.delenv(k, raising=False)
    assert shim_main(["torch", "--here", "--", "-m", "probe_mod", "a", "b"]) == 7
    assert (os.environ["RANK"], os.environ["LOCAL_RANK"]) == ("2", "0")


@pytest.fixture
def tcp_zygote(tmp_path):
    """A zygote serving over TCP as on a node of an allocation (here: this box), and its token."""
    token = "t" * 64
    env = {**zygote_env(), TOKEN_VAR: token, "SLURMD_NODENAME": "n7", "NODE_ONLY": "from-the-node"}
    log = open(tmp_path / "zygote.log", "w")  # noqa: SIM115 - the zygote writes it
    proc = subprocess.Popen(
        [*python_argv(), "-m", "harness.warm.zygote", "--tcp", str(tmp_path)],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    announced = tmp_path / "zygote.n7.json"
    deadline = time.monotonic() + 120
    while not announced.exists():
        assert proc.poll() is None and time.monotonic() < deadline, (tmp_path / "zygote.log").read_text()
        time.sleep(0.05)
    yield json.loads(announced.read_text())["port"], token, proc
    proc.kill()
    proc.wait()
    log.close()


def test_a_tcp_zygote_serves_only_its_token_and_forks_with_the_nodes_environment(tmp_path, tcp_zygote):
    port, token, proc = tcp_zygote
    stranger = socket.create_connection(("127.0.0.1", port), timeout=10)
    stranger.sendall(b"not-the-token\n")
    stranger.settimeout(15)
    assert stranger.recv(100) == b"", "a connection without the token was served"
    stranger.close()
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    sock.sendall(token.encode() + b"\n")
    link = ZygoteConnection(sock, remote=True)
    assert link.handshake(120)["ready"]
    script = (
        "import os, sys, time\n"
        "print(os.environ.get('NODE_ONLY'), os.environ.get('SLURM_PROCID'), os.environ.get('GONE'),"
        " os.environ.get(sys.argv[1]), flush=True)\n"
        "time.sleep(float(sys.argv[2]))\n"
    )
    (tmp_path / "sleeper.py").write_text(script)
    env = {"SLURM_PROCID": "3", "PYTHONPATH": f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    rank = link.spawn("sleeper_main", [TOKEN_VAR, "600"], env, tmp_path / "rank3.log", inherit=True, unset=("GONE",))
    deadline = time.monotonic() + 30
    while not (tmp_path / "rank3.log").read_text().strip():
        assert time.monotonic() < deadline and rank.poll() is None, (tmp_path / "rank3.log").read_text()
        time.sleep(0.05)
    # the node's variables, the request's, nothing unset, and never the token
    assert (tmp_path / "rank3.log").read_text().split() == ["from-the-node", "3", "None", "None"]
    rank.kill_group()  # through the zygote: the pid is the node's
    assert rank.wait(timeout=10) == -signal.SIGKILL
    link.close()
    assert proc.wait(timeout=15) == 0  # its client gone, it kills its children and exits


@pytest.fixture(autouse=True)
def _sleeper_module(tmp_path):
    """`sleeper_main`: a module with main(argv) that runs tmp_path/sleeper.py (the zygote runs a module's main)."""
    (tmp_path / "sleeper_main.py").write_text(
        "import runpy, sys\n"
        "def main(argv):\n"
        f"    sys.argv = ['sleeper.py', *argv]\n"
        f"    runpy.run_path({str(tmp_path / 'sleeper.py')!r}, run_name='__main__')\n"
        "    return 0\n"
    )
    yield
    sys.modules.pop("sleeper_main", None)
