"""A real Slurm on this host (slurm/local/up.sh, 2 fake nodes): real sbatch jobs, real ranks.

    sudo python -m pytest -m root tests/integration/slurm/test_slurm_local.py

Needs root and Debian's Slurm packages (up.sh installs them with apt-get). Without them these tests
skip, loudly, except under CI=true, where they fail: CI must not go green without having run them.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.contracts.hostlist import expand_hostlist
from harness.contracts.recipes.sbatch import SbatchSpec
from harness.jobs.client import cancel, job_state, submit, wait_job
from harness.launchers.sbatch.script import render_sbatch
from harness.launchers.srun.env import port_for_job
from helpers import LOCAL_SLURM_CPUS, ROOT

pytestmark = pytest.mark.root

UP = ROOT / "slurm" / "local" / "up.sh"
DOWN = ROOT / "slurm" / "local" / "down.sh"
STATE = Path("/var/spool/ddlbench-slurm")
CONF = Path("/etc/slurm/slurm.conf")
JOB_TIMEOUT_S = 60
SHAPE = ("--nodes", "2", "--cpus", str(LOCAL_SLURM_CPUS))
"""The cluster's shape, as the `slurm` fixture (tests/integration/slurm/conftest.py) starts it for this folder."""

# Each task prints one line: what from_environ (the harness's entry point) says, and what from_slurm
# says when it has to find the rendezvous itself (scontrol show hostnames + NodeAddr).
RANK_PROBE = (
    "import os; from harness import backends; from harness.launchers.identity import from_environ; "
    "from harness.launchers.srun.env import from_slurm; backends.load(); "
    "e = from_environ(); "
    "own = from_slurm({k: v for k, v in os.environ.items() if not k.startswith('MASTER_')}); "
    "print('RANKINFO', e.rank, e.world_size, e.local_rank, e.local_world_size, e.node_rank, e.nodes, "
    "e.master_addr, e.master_port, e.source, own.master_addr, own.master_port, "
    "os.environ['SLURMD_NODENAME'], flush=True)"
)


def _env() -> dict[str, str]:
    # The job's tasks import harness from the checkout, installed with pip -e or not.
    return {"PYTHONPATH": str(ROOT)}


def _run_job(tmp_path: Path, **spec_kwargs) -> tuple[str, str, str]:
    spec = SbatchSpec(time_limit_min=2, output="%x-%j.out", env=_env(), **spec_kwargs)
    job = submit(render_sbatch(spec), tmp_path)
    state = wait_job(job, timeout_s=JOB_TIMEOUT_S)
    out = tmp_path / f"{spec.job_name}-{job}.out"
    return job, state, out.read_text() if out.exists() else ""


def _rank_lines(text: str) -> list[list[str]]:
    return sorted((ln.split()[1:] for ln in text.splitlines() if ln.startswith("RANKINFO")), key=lambda f: int(f[0]))


def test_up_is_idempotent(slurm):
    res = subprocess.run([str(UP), *SHAPE], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    assert "already up and healthy" in res.stdout


def test_expand_hostlist_agrees_with_slurm(slurm):
    text = "n[1-3,5],gpu[07-09],rack[1-2]-n[1,3],x"
    out = subprocess.run(["scontrol", "show", "hostnames", text], capture_output=True, text=True, timeout=10)
    assert out.returncode == 0, out.stderr
    assert expand_hostlist(text) == out.stdout.split()


@pytest.mark.parametrize("launch", ["srun", "deepspeed"])  # deepspeed: the torch variables path
def test_two_nodes_one_task_each(slurm, tmp_path, launch):
    job, state, out = _run_job(
        tmp_path,
        job_name=f"ranks-2x1-{launch}",
        nodes=2,
        tasks_per_node=1,
        launch=launch,
        command=(sys.executable, "-c", RANK_PROBE),
    )
    assert state == "COMPLETED", out
    rows = _rank_lines(out)
    assert [r[0] for r in rows] == ["0", "1"], out
    port = str(port_for_job(job))
    for rank, row in enumerate(rows):
        world, local_rank, local_world, node_rank, nodes = row[1:6]
        assert (world, local_rank, local_world, node_rank, nodes) == ("2", "0", "1", str(rank), "2")
        # Exported by the script and found independently by from_slurm: the same, real address.
        assert row[6:9] == ["127.0.0.1", port, "slurm"], row
        assert row[9:11] == ["127.0.0.1", port], row
    assert {r[11] for r in rows} == {"n1", "n2"}, "the two ranks must run on different nodes"


def test_one_node_two_tasks(slurm, tmp_path):
    _, state, out = _run_job(
        tmp_path, job_name="ranks-1x2", nodes=1, tasks_per_node=2, command=(sys.executable, "-c", RANK_PROBE)
    )
    assert state == "COMPLETED", out
    rows = _rank_lines(out)
    assert [(r[0], r[1], r[2], r[3], r[5]) for r in rows] == [("0", "2", "0", "2", "1"), ("1", "2", "1", "2", "1")]
    assert rows[0][11] == rows[1][11]


def test_failing_task_makes_the_job_failed(slurm, tmp_path):
    _, state, _ = _run_job(tmp_path, job_name="fails", nodes=2, command=("bash", "-c", "exit 1"))
    assert state == "FAILED"


def test_cancelled_job_shows_cancelled(slurm, tmp_path):
    spec = SbatchSpec(
        job_name="cancel-me", nodes=2, command=("sleep", "300"), time_limit_min=5, output="%x-%j.out", env=_env()
    )
    job = submit(render_sbatch(spec), tmp_path)
    deadline = time.monotonic() + JOB_TIMEOUT_S
    while job_state(job) != "RUNNING":
        assert time.monotonic() < deadline, f"job {job} never started: {job_state(job)}"
        time.sleep(0.2)
    cancel(job)
    assert wait_job(job, timeout_s=JOB_TIMEOUT_S) == "CANCELLED"


def _leftover_pids() -> list[int]:
    """Processes of the local cluster still alive: its daemons and job tasks."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            cmd = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            env = (proc / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if not cmd:  # zombies: already dead, waiting for a parent that never reaps
            continue
        if f"-f {CONF}" in cmd or str(STATE) in cmd or b"SLURM_CLUSTER_NAME=ddlbench-local" in env:
            found.append(int(proc.name))
    return found


def test_down_cleans_up_after_a_crashed_controller(slurm, tmp_path):
    # A job is running when the controller dies: down.sh must still end the tasks and every daemon.
    spec = SbatchSpec(job_name="orphan", nodes=2, command=("sleep", "300"), output="%x-%j.out", env=_env())
    job = submit(render_sbatch(spec), tmp_path)
    deadline = time.monotonic() + JOB_TIMEOUT_S
    while job_state(job) != "RUNNING":
        assert time.monotonic() < deadline
        time.sleep(0.2)
    os.kill(int((STATE / "run" / "slurmctld.pid").read_text()), signal.SIGKILL)
    for _ in range(2):  # idempotent: the second run finds nothing to do
        res = subprocess.run([str(DOWN)], capture_output=True, text=True, timeout=120)
        assert res.returncode == 0, res.stderr
    assert _leftover_pids() == []
    assert not STATE.exists() and not CONF.exists()
    # And the cluster comes back from nothing (the fixture, tests/integration/slurm/conftest.py, takes it down).
    res = subprocess.run([str(UP), *SHAPE], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
