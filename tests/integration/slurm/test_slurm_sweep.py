"""Sweeps under Slurm: `ddlbench slurm submit`, cells as srun steps, failures, cancel and resume.

    pytest tests/integration/slurm/test_slurm_sweep.py                      # pure tests; real-Slurm ones need root
    sudo python -m pytest -m root tests/integration/slurm/test_slurm_sweep.py
    python tests/integration/slurm/test_slurm_sweep.py --regenerate         # rewrite the reference texts:
                                                          # tests/data/sbatch_reference_submit*.sh, slurm/*.sbatch
                                                          # and the backends' slurm/sweeps/*.yaml, then read the diff

The real-Slurm tests bring up slurm/local (2 fake nodes on this host) and submit three small CPU
sweeps at once: a 2-node sweep, one whose rank 1 crashes, and one cancelled half-way and resumed.
Without root or Slurm packages they skip loudly, except under CI=true, where they fail.
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import threading
import time
import warnings
from pathlib import Path

import pandas as pd
import psutil
import pytest
import yaml
from click.testing import CliRunner

from harness.cli.main import cli
from harness.contracts.backend import recipe
from harness.contracts.cell import CellSpec
from harness.contracts.launcher import LaunchRequest
from harness.contracts.recipes.srun import Allocation, SrunRecipe
from harness.core.errors import UserError
from harness.experiment.sweep import sweep_from_dict
from harness.jobs.client import cancel, job_state, wait_job
from harness.jobs.sweep_jobs import (
    SweepJob,
    example_scripts,
    example_sweeps,
    parse_time_min,
    plan_jobs,
    render_submit,
)
from harness.launchers.choose import by_name, choose_launcher
from harness.launchers.local.launcher import launch_one_box
from harness.launchers.srun.context import SrunCellContext, nodes_for, place
from harness.launchers.srun.launcher import step_environment
from harness.launchers.srun.steps import cell_port, failure_reason
from harness.rank.srun_task import task_env
from helpers import ROOT, rank_pids, stopped_in_one_line

DATA = ROOT / "tests" / "data"
JOB_TIMEOUT_S = 420  # one job of two CPU cells; generous because the 2 cores here are shared

# ------------------------------------------------------------------------------ job script text

SUBMIT_JOBS = [
    SweepJob(
        name="ddlbench-paper-n1",
        nodes=1,
        workers=(1, 2, 4),
        baseline=True,
        sweep_file="/runs/r1/sweeps/paper-n1.yaml",
        output="/runs/r1/r1-n1",
        time_min=95,
    ),
    SweepJob(
        name="ddlbench-paper-n2",
        nodes=2,
        workers=(8,),
        baseline=False,
        sweep_file="/runs/r1/sweeps/paper-n2.yaml",
        output="/runs/r1/r1-n2",
        time_min=35,
    ),
]
SUBMIT_ARGS = dict(
    tasks_per_node=4,
    gpus_per_node=4,
    cpus_per_task=8,
    partition="gpu",
    extra_sbatch=("--exclusive",),
    log_dir="/runs/r1",
    program=("ddlbench",),
)


def submit_references() -> dict[str, str]:
    single = render_submit(SUBMIT_JOBS, **SUBMIT_ARGS)
    array = render_submit(SUBMIT_JOBS, array=True, **SUBMIT_ARGS)
    return {"sbatch_reference_submit.sh": single[1], "sbatch_reference_submit_array.sh": array[0]}


@pytest.mark.parametrize("name", sorted(submit_references()))
def test_submit_script_matches_reference(name):
    assert submit_references()[name] == (DATA / name).read_text(), (
        "the submit job script changed; if intended, run "
        "`python tests/integration/slurm/test_slurm_sweep.py --regenerate` and review the diff"
    )


def test_one_script_per_job_and_each_runs_its_part():
    scripts = render_submit(SUBMIT_JOBS, **SUBMIT_ARGS)
    assert len(scripts) == 2
    for job, text in zip(SUBMIT_JOBS, scripts):
        assert f"#SBATCH --nodes={job.nodes} " in text and f"SWEEP={job.sweep_file}" in text
        assert 'ddlbench sweep "${SWEEP}" --output "${RESULTS}" --resume --launcher srun' in text


def _bash_n(text: str) -> None:
    res = subprocess.run(["bash", "-n"], input=text, text=True, capture_output=True)
    assert res.returncode == 0, res.stderr


def _directives_documented(text: str) -> None:
    lines = [ln for ln in text.splitlines() if ln.startswith("#SBATCH")]
    assert lines
    for line in lines:
        assert "  # " in line and line.split("  # ", 1)[1].strip(), f"undocumented: {line!r}"


@pytest.mark.parametrize("name", sorted(example_scripts()))
def test_committed_example_script_is_the_rendered_one(name):
    text = example_scripts()[name]
    assert (ROOT / "slurm" / name).read_text() == text, (
        f"slurm/{name} differs from harness.jobs.sweep_jobs.example_scripts(); regenerate with "
        f"`python tests/integration/slurm/test_slurm_sweep.py --regenerate`"
    )
    _bash_n(text)
    _directives_documented(text)
    sweep = text.split("DDLBENCH_SWEEP:-", 1)[1].split("}", 1)[0]
    assert (ROOT / sweep).exists(), f"{name} points at a missing sweep file {sweep}"


def test_no_stray_example_scripts():
    assert {p.name for p in (ROOT / "slurm").glob("*.sbatch")} == set(example_scripts())


@pytest.mark.parametrize("name", sorted(example_sweeps()))
def test_committed_sweep_file_is_the_one_its_backend_declares(name):
    """The sweep files a backend's examples run are declared by the backend (SbatchRecipe.sweeps) and written
    by --regenerate: a new backend writes no sweep file by hand."""
    text = example_sweeps()[name]
    assert (ROOT / "slurm" / "sweeps" / name).read_text() == text, (
        f"slurm/sweeps/{name} differs from harness.jobs.sweep_jobs.example_sweeps(); regenerate with "
        f"`python tests/integration/slurm/test_slurm_sweep.py --regenerate`"
    )
    assert sweep_from_dict(yaml.safe_load(text), name).name == name.removesuffix(".yaml")  # known keys only


def test_submit_scripts_are_valid_bash():
    for text in submit_references().values():
        _bash_n(text)
        _directives_documented(text)


# ---------------------------------------------------------------------------------- planning


def test_plan_jobs_one_job_per_node_count(tmp_path):
    data = {
        "name": "p",
        "workloads": ["resnet50-tiny"],
        "schemes": ["ddp"],
        "workers": [1, 2, 3, 4, 8],
        "timeout_s": 60,
        "device": "cpu",
    }
    jobs = plan_jobs(data, tmp_path / "r", nodes=2, per_node=4)
    assert [(j.nodes, j.workers, j.baseline) for j in jobs] == [(1, (1, 2, 3, 4), True), (2, (8,), False)]
    assert jobs[0].time_min == (5 * 60 + 300) // 60  # 4 ddp cells + the baseline, plus start-up
    assert jobs[1].output == str(tmp_path / "r" / "r-n2")


def test_plan_jobs_refuses_a_sweep_larger_than_the_nodes(tmp_path):
    with pytest.raises(UserError, match="need 3 nodes at 4 per node, more than --nodes 2"):
        plan_jobs({"workers": [12], "device": "cpu"}, tmp_path, nodes=2, per_node=4)


@pytest.mark.parametrize("text, minutes", [("90", 90), ("1:30:00", 90), ("2:30", 3), ("1-0", 1440), ("1-02:03", 1563)])
def test_parse_time_min(text, minutes):
    assert parse_time_min(text) == minutes


# ----------------------------------------------------------------------------------- srun steps

ALLOC3 = Allocation(job_id="77", nodes=("n1", "n2", "n3"), tasks_per_node=2, cpus_per_node=(2, 2, 2), here="n1")
ALLOC2 = Allocation(job_id="77", nodes=("n1", "n2"), tasks_per_node=2, cpus_per_node=(2, 2), here="n1")


def _cell(**kw) -> CellSpec:
    return CellSpec(
        **{
            "workload": "resnet50-tiny",
            "scheme": "wfbp-ps",
            "workers": 3,
            "servers": 2,
            "nodes": 2,
            "device": "cpu",
            **kw,
        }
    )


def _plan(cell, alloc, cell_dir, master_addr, port, command, style=None, rendezvous=None):
    """The steps of `cell` as launch_cell_srun plans them: its backend's srun recipe over the context."""
    ctx = SrunCellContext(cell, alloc, cell_dir, master_addr, port, tuple(command), style, rendezvous)
    return recipe(cell.backend, SrunRecipe).plan(ctx)


def test_servers_on_spare_nodes_else_beside_the_workers():
    assert place(_cell(), ALLOC3) == (["n1", "n1", "n2"], ["n3", "n3"])
    assert place(_cell(), ALLOC2) == (["n1", "n1", "n2"], ["n1", "n2"])
    assert nodes_for(ALLOC2, 4) == 2 and nodes_for(ALLOC2, 1) == 1
    with pytest.raises(UserError, match="need 3 nodes"):
        nodes_for(ALLOC2, 5)


def test_torch_cell_is_one_step_with_a_host_per_rank(tmp_path):
    [step] = _plan(_cell(), ALLOC2, tmp_path, "127.0.0.1", 24000, ("w",))
    argv = list(step.argv)
    assert argv[0] == "srun" and argv[-1] == "w"
    for opt in (
        "--nodes=2",
        "--ntasks=5",
        "--distribution=arbitrary",
        "--kill-on-bad-exit=1",
        "--cpus-per-task=1",
        f"--output={tmp_path}/rank%t.log",
        "--overcommit",
    ):
        assert opt in argv, opt
    assert step.hosts == ("n1", "n1", "n2", "n1", "n2")
    env = step_environment({"RANK": "0", "WORLD_SIZE": "2", "SLURM_NTASKS_PER_NODE": "1", "KEEP": "1"}, step)
    assert "RANK" not in env and "WORLD_SIZE" not in env and "SLURM_NTASKS_PER_NODE" not in env
    assert (env["MASTER_ADDR"], env["MASTER_PORT"], env["KEEP"]) == ("127.0.0.1", "24000", "1")
    [spare] = _plan(_cell(), ALLOC3, tmp_path, "127.0.0.1", 24000, ("w",))
    assert "--overcommit" not in spare.argv and "--nodes=3" in spare.argv


def test_byteps_cell_is_scheduler_servers_and_workers(tmp_path):
    steps = _plan(_cell(backend="byteps"), ALLOC3, tmp_path, "10.0.0.1", 24000, ("w",))
    assert [(s.role, s.main, s.hosts) for s in steps] == [
        ("scheduler", False, ("n1",)),
        ("servers", False, ("n3", "n3")),
        ("workers", True, ("n1", "n1", "n2")),
    ]
    env = dict(steps[0].env)
    assert (env["DMLC_NUM_WORKER"], env["DMLC_NUM_SERVER"], env["DMLC_PS_ROOT_URI"], env["DMLC_PS_ROOT_PORT"]) == (
        "2",
        "2",
        "10.0.0.1",
        "24001",
    )
    assert "DMLC_ROLE=scheduler" in steps[0].argv and "DMLC_ROLE=server" in steps[1].argv
    assert steps[2].argv[-3:] == ("byteps", "--", "w")  # the shim gives each worker DMLC_ROLE=worker


def test_horovodrun_and_horovod_srun_plans(tmp_path):
    cell = _cell(scheme="wfbp-a2a", servers=0, backend="horovod")
    [run] = _plan(cell.with_(knobs={"fusion_threshold_mb": 64}), ALLOC2, tmp_path, "a", 1, ("w",), style="horovodrun")
    assert run.argv[0].endswith("horovodrun")
    assert run.argv[1:8] == ("--gloo", "-np", "3", "-H", "n1:2,n2:1", "--fusion-threshold-mb", "64")
    assert dict(run.env)["HOROVOD_FUSION_THRESHOLD"] == str(64 << 20)  # what hvd.init() reads
    [srun] = _plan(cell, ALLOC2, tmp_path, "a", 1, ("w",), rendezvous=("10.0.0.9", 5555))
    assert dict(srun.env)["HOROVOD_GLOO_RENDEZVOUS_PORT"] == "5555" and srun.hosts == ("n1", "n1", "n2")


def test_cell_ports_differ_per_cell_and_stay_in_range():
    ports = {cell_port("4242", f"cell{i}") for i in range(50)}
    assert len(ports) > 45 and all(20000 <= p < 32000 for p in ports)
    assert cell_port("4242", "x") == cell_port("4242", "x") != cell_port("4243", "x")


# Messages of a real srun (Slurm 22.05, slurm/local) when task 1 exits 17 with --kill-on-bad-exit,
# and when the step is ended by a signal.
SRUN_CRASH = """srun: error: n2: task 1: Exited with exit code 17
srun: launch/slurm: _step_signal: Terminating StepId=3.0
srun: error: n1: task 0: Terminated
srun: Force Terminated StepId=3.0
"""
SRUN_KILLED = """srun: forcing job termination
srun: error: n2: task 1: Killed
srun: error: n1: task 0: Killed
"""


def test_failure_reason_names_the_first_failed_rank():
    assert failure_reason(SRUN_CRASH, 143) == ("rank 1 died (exit code 17)", 1)
    assert failure_reason(SRUN_KILLED, 137) == ("rank 1 died (SIGKILL)", 1)
    assert failure_reason("srun: error: Unable to create step for job 9: Invalid node name", 1)[0] == (
        "workers step ended (exit code 1): srun: error: Unable to create step for job 9: Invalid node name"
    )


def _slurm_task(procid: int, nodeid: int, localid: int) -> dict[str, str]:
    # A step of 3 tasks on n1 (2) and n2 (1), as srun --distribution=arbitrary sets it.
    return {
        "SLURM_JOB_ID": "77",
        "SLURM_PROCID": str(procid),
        "SLURM_NTASKS": "3",
        "SLURM_NODEID": str(nodeid),
        "SLURM_LOCALID": str(localid),
        "SLURM_STEP_NUM_NODES": "2",
        "SLURM_STEP_TASKS_PER_NODE": "2,1",
        "SLURM_STEP_NODELIST": "n[1-2]",
        "SLURMD_NODENAME": f"n{nodeid + 1}",
        "MASTER_ADDR": "10.0.0.1",
        "MASTER_PORT": "24000",
        "HOROVOD_GLOO_RENDEZVOUS_ADDR": "127.0.0.1",
        "GLOO_SOCKET_IFNAME": "eth9",
    }


def test_task_env_per_style():
    t = task_env("torch", _slurm_task(2, 1, 0))
    assert (t["RANK"], t["WORLD_SIZE"], t["LOCAL_RANK"], t["LOCAL_WORLD_SIZE"], t["NODE_RANK"]) == (
        "2",
        "3",
        "0",
        "1",
        "1",
    )
    assert (t["MASTER_ADDR"], t["MASTER_PORT"]) == ("10.0.0.1", "24000")
    h = [task_env("horovod", _slurm_task(*a)) for a in ((0, 0, 0), (1, 0, 1), (2, 1, 0))]
    assert [
        (x["HOROVOD_RANK"], x["HOROVOD_LOCAL_SIZE"], x["HOROVOD_CROSS_RANK"], x["HOROVOD_CROSS_SIZE"]) for x in h
    ] == [("0", "2", "0", "2"), ("1", "2", "0", "1"), ("2", "1", "1", "2")]
    assert h[2]["HOROVOD_HOSTNAME"] == "n2" and h[0]["HOROVOD_GLOO_IFACE"] == "eth9"
    b = task_env("byteps", _slurm_task(1, 0, 1))
    assert (b["DMLC_ROLE"], b["DMLC_WORKER_ID"], b["BYTEPS_LOCAL_RANK"], b["BYTEPS_LOCAL_SIZE"]) == (
        "worker",
        "0",
        "1",
        "2",
    )
    r = task_env(
        "horovodrun",
        {
            "SLURM_PROCID": "0",
            "HOROVOD_RANK": "3",
            "HOROVOD_SIZE": "4",
            "HOROVOD_LOCAL_RANK": "1",
            "HOROVOD_LOCAL_SIZE": "2",
            "HOROVOD_CROSS_RANK": "1",
        },
    )
    assert (r["RANK"], r["WORLD_SIZE"], r["LOCAL_RANK"], r["SLURM_PROCID"]) == ("3", "4", "1", None)


def test_choose_launcher():
    assert choose_launcher(LaunchRequest({})).name == "local"
    inside = {"SLURM_JOB_ID": "5", "SLURM_JOB_NODELIST": "n[1-2]", "SLURM_NTASKS_PER_NODE": "1"}
    srun = choose_launcher(LaunchRequest(inside))
    assert srun.name == "srun" and srun.nodes_for(2) == 2 and srun.env_extra == {"hosts": "n1,n2"}
    local = choose_launcher(LaunchRequest(inside), "local")
    assert (local.name, local.launch, local.hosts, local.run_module) == ("local", launch_one_box, 1, None)
    with pytest.raises(UserError, match="allocation"):
        choose_launcher(LaunchRequest({}), "srun")
    with pytest.raises(UserError, match=f"available: {', '.join(by_name())}$"):
        choose_launcher(LaunchRequest({}), "mpirun")


# ---------------------------------------------------------------------------------- bad input

TINY = {
    "name": "tiny",
    "workloads": ["resnet50-tiny"],
    "schemes": ["ddp"],
    "workers": [2],
    "warmup": 1,
    "iters": 3,
    "device": "cpu",
    "timeout_s": 150,
    "baseline": False,
}


def _sweep(tmp_path: Path, name: str = "s", **over) -> Path:
    p = tmp_path / f"{name}.yaml"
    p.write_text(yaml.safe_dump({**TINY, "name": name, **over}))
    return p


def _cli(*args, env=None):
    return CliRunner().invoke(cli, [str(a) for a in args], env=env)


def _one_line_error(res, words: str) -> None:
    assert res.exit_code == 2, res.output
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and words in lines[0], res.output


@pytest.mark.parametrize(
    "args, over, words",
    [
        (["--gpus-per-node", "2", "--tasks-per-node", "4"], {"device": "auto"}, "one worker runs per GPU"),
        (["--nodes", "1"], {"workers": [2]}, "need 2 nodes at 1 per node, more than --nodes 1"),
        (["--time", "soon"], {}, "is not a Slurm time"),
        ([], {"device": "cuda"}, "--gpus-per-node is 0"),
    ],
)
def test_submit_bad_input_is_one_line_exit_2(tmp_path, args, over, words):
    args = ["--nodes", "2", *args] if "--nodes" not in args else args
    _one_line_error(_cli("slurm", "submit", _sweep(tmp_path, **over), *args, "--output", tmp_path / "r"), words)


def test_submit_without_sbatch_is_one_line_exit_2(tmp_path):
    empty = tmp_path / "bin"
    empty.mkdir()
    res = _cli(
        "slurm", "submit", _sweep(tmp_path), "--nodes", "2", "--output", tmp_path / "r", env={"PATH": str(empty)}
    )
    _one_line_error(res, "`sbatch` is not installed")


# ------------------------------------------------------------------------------- real Slurm


@pytest.fixture(scope="module")
def jobs(slurm, tmp_path_factory):
    """Three sweeps submitted together through `ddlbench slurm submit`: {name: (run dir, job id, t0)}."""
    base = tmp_path_factory.mktemp("slurm-sweeps")
    plans = {
        "two-node": (_sweep(base, "two-node", schemes=["ddp", "wfbp-a2a"]), []),
        "crash": (_sweep(base, "crash", baseline=True), ["--sbatch-arg=--export=ALL,DDLBENCH_FAULT=crash:1:1"]),
        "cancel": (_sweep(base, "cancel", baseline=True), []),
    }
    out = {}
    for name, (sweep, extra) in plans.items():
        t0 = time.monotonic()
        res = _cli("slurm", "submit", sweep, "--nodes", "2", "--time", "10", "--output", base / name, *extra)
        assert res.exit_code == 0, res.output
        job = res.output.split()[0]
        out[name] = (base / name, job, t0)
    # Cancel the third job as soon as its first cell (the baseline) is in its tables, while ddp runs.
    run, job, _ = out["cancel"]
    out["cancelled"] = False

    def cancel_after_first_cell():
        deadline = time.monotonic() + JOB_TIMEOUT_S
        while time.monotonic() < deadline and job_state(job) in ("PENDING", "RUNNING", "CONFIGURING"):
            if (run / "cancel-n2" / "summary.parquet").exists():  # consolidated after the cell's part
                cancel(job)
                out["cancelled"] = True
                return
            time.sleep(0.5)

    out["cancel-watcher"] = threading.Thread(target=cancel_after_first_cell, daemon=True)
    out["cancel-watcher"].start()
    return out


# Each rank of a probe reports what its framework says about it, then all-reduces rank+1.
PROBE = """
import json, os, sys
from pathlib import Path
out, style = Path(sys.argv[1]), sys.argv[2]
import torch
if style == "horovod":
    import horovod.torch as hvd
    hvd.init()
    total = hvd.allreduce(torch.tensor([float(hvd.rank() + 1)]), op=hvd.Sum).item()
    info = {"rank": hvd.rank(), "size": hvd.size(), "local_rank": hvd.local_rank(), "sum": total}
else:  # the torch variables, read the way deepspeed.init_distributed reads them (env://)
    import torch.distributed as dist
    dist.init_process_group("gloo", init_method="env://")
    t = torch.tensor([float(dist.get_rank() + 1)])
    dist.all_reduce(t)
    info = {"rank": dist.get_rank(), "size": dist.get_world_size(), "local_rank": int(os.environ["LOCAL_RANK"]),
            "sum": t.item()}
info["node"] = os.environ.get("SLURMD_NODENAME", "")
(out / f"probe{info['rank']}.json").write_text(json.dumps(info))
if info["rank"] == 0:
    (out / "result.json").write_text(json.dumps(info))
if style == "horovod":
    hvd.shutdown()
else:
    dist.destroy_process_group()
from harness.rank.worker import exit_now  # as the worker leaves: no interpreter teardown (intermittent abort)
exit_now(0)
"""
DRIVER = """
import sys
from pathlib import Path
from harness import backends
from harness.contracts.cell import CellSpec
from harness.launchers.srun.launcher import launch_cell_srun
backends.load()  # as every entry point does (docs/ARCHITECTURE.md, "Plugins")
backend, nodes, out, probe = sys.argv[1], int(sys.argv[2]), Path(sys.argv[3]), sys.argv[4]
cell = CellSpec(workload="resnet50-tiny", scheme="wfbp-a2a", backend=backend, workers=2, nodes=nodes,
                device="cpu", timeout_s=200)
launch_cell_srun(cell, out, command=(sys.executable, probe, str(out), "horovod" if backend == "horovod" else "torch"))
"""


@pytest.mark.root
@pytest.mark.parametrize(
    "backend, nodes, launch", [("deepspeed", 2, "srun"), ("horovod", 2, "srun"), ("horovod", 1, "horovodrun")]
)
def test_backend_launch_styles_give_each_rank_its_place(jobs, tmp_path, backend, nodes, launch):
    """The srun launcher's per-backend start (harness.launchers.srun.launcher), with a probe instead of the worker:
    every rank must learn its rank from its framework and all-reduce with the others."""
    if backend == "horovod" and importlib.util.find_spec("horovod") is None:
        warnings.warn("SKIPPING the Horovod launch probe: horovod is not installed", stacklevel=2)
        pytest.skip("horovod not installed (scripts/install_frameworks.sh horovod)")
    (tmp_path / "probe.py").write_text(PROBE)
    out = tmp_path / "cell"
    env = {**os.environ, "DDLBENCH_HOROVOD_LAUNCH": launch}
    res = subprocess.run(
        [
            "salloc",
            f"-N{nodes}",
            f"--ntasks-per-node={3 - nodes}",
            "--time=5",
            sys.executable,
            "-c",
            DRIVER,
            backend,
            str(nodes),
            str(out),
            str(tmp_path / "probe.py"),
        ],
        capture_output=True,
        text=True,
        timeout=JOB_TIMEOUT_S,
        env=env,
    )
    logs = "".join(p.read_text() for p in sorted(out.glob("*.log")))
    assert res.returncode == 0, res.stdout + res.stderr + logs
    ranks = [json.loads((out / f"probe{r}.json").read_text()) for r in (0, 1)]
    assert [(r["rank"], r["size"], r["sum"]) for r in ranks] == [(0, 2, 3.0), (1, 2, 3.0)]
    if nodes == 2:
        assert [(r["local_rank"], r["node"]) for r in ranks] == [(0, "n1"), (0, "n2")]
    assert (out / "rank0.log").exists() and (out / "rank1.log").exists()


HANG_DRIVER = """
import sys
from pathlib import Path
from harness import backends
from harness.contracts.cell import CellSpec
from harness.core.errors import CellFailed
from harness.launchers.srun.launcher import launch_cell_srun
backends.load()  # as every entry point does (docs/ARCHITECTURE.md, "Plugins")
cell = CellSpec(workload="resnet50-tiny", scheme="ddp", workers=2, nodes=2, device="cpu", timeout_s=5)
try:
    launch_cell_srun(cell, Path(sys.argv[1]), command=("sleep", sys.argv[2]))
except CellFailed as e:
    print("REASON", e.reason)
    print(e.log_tail)
"""


@pytest.mark.root
def test_hung_step_ends_at_the_cell_timeout(jobs, tmp_path):
    marker = "4242.25"  # an unusual sleep length, to find leftovers by
    t0 = time.monotonic()
    res = subprocess.run(
        [
            "salloc",
            "-N2",
            "--ntasks-per-node=1",
            "--time=5",
            sys.executable,
            "-c",
            HANG_DRIVER,
            str(tmp_path / "cell"),
            marker,
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "REASON timed out after 5 s; the step was cancelled" in res.stdout, res.stdout + res.stderr
    assert "--- srun.log ---" in res.stdout and time.monotonic() - t0 < 60
    left = subprocess.run(["pgrep", "-f", f"sleep {marker}"], capture_output=True, text=True).stdout.split()
    assert left == [], f"tasks of the timed-out step still running: {left}"


@pytest.mark.root
def test_cancelled_job_keeps_finished_cells_and_resume_completes_it(jobs):
    run, job, _ = jobs["cancel"]
    part = run / "cancel-n2"
    jobs["cancel-watcher"].join(JOB_TIMEOUT_S)
    assert jobs["cancelled"], f"job {job} ended as {job_state(job)} before its first cell finished"
    assert wait_job(job, timeout_s=60) == "CANCELLED"
    res = _cli("slurm", "status", run)
    assert res.exit_code == 0 and f"{job}\tCANCELLED" in res.output, res.output
    assert json.loads((run / "slurm-jobs.json").read_text())[0]["state"] == "CANCELLED"
    before = pd.read_parquet(part / "summary.parquet").set_index("scheme")
    assert before.loc["local", "status"] == "ok"
    # scancel's SIGTERM reached the sweep mid-cell: that cell is recorded as interrupted, to run again
    if "ddp" in before.index:
        assert before.loc["ddp", "status"] == "failed" and before.loc["ddp", "reason"].startswith("interrupted")
    # and the job's sweep said so in one line of its log (stdout and stderr together: the summary's own
    # `failed CELL: interrupted ...` rows are stdout), as every command that runs cells does
    log = "".join(p.read_text() for p in run.glob(f"slurm-*-{job}.out"))
    line = stopped_in_one_line("\n".join(ln for ln in log.splitlines() if not ln.startswith("failed ")))
    assert "finish with --resume --output" in line and line.endswith(part.name), log
    raw_before = pd.read_parquet(part / "raw.parquet")
    # `ddlbench sweep --resume` in a new allocation of the same shape runs only the missing cell.
    res = subprocess.run(
        [
            "salloc",
            "-N2",
            "--ntasks-per-node=1",
            "--time=10",
            sys.executable,
            "-m",
            "harness.cli.main",
            "sweep",
            str(run / "sweeps" / "cancel-n2.yaml"),
            "--output",
            str(part),
            "--resume",
            "--no-progress",
        ],
        capture_output=True,
        text=True,
        timeout=JOB_TIMEOUT_S,
    )
    assert res.returncode == 0, res.stdout + res.stderr
    after = pd.read_parquet(part / "summary.parquet").set_index("scheme")
    assert (after["status"] == "ok").all() and sorted(after.index) == ["ddp", "local"], after["reason"]
    assert after.loc["ddp", "nodes"] == 2
    raw_after = pd.read_parquet(part / "raw.parquet")
    kept = raw_after[raw_after["cell_id"] == raw_before["cell_id"].iloc[0]].reset_index(drop=True)
    pd.testing.assert_frame_equal(kept, raw_before)


@pytest.mark.root
def test_two_node_sweep_lands_in_the_tables(jobs):
    run, job, t0 = jobs["two-node"]
    assert wait_job(job, timeout_s=JOB_TIMEOUT_S) == "COMPLETED", (
        run / f"slurm-ddlbench-two-node-n2-{job}.out"
    ).read_text()
    print(f"two-node sweep: sbatch submit to rows on disk {time.monotonic() - t0:.0f} s")
    part = run / "two-node-n2"
    summary = pd.read_parquet(part / "summary.parquet")
    assert sorted(summary["scheme"]) == ["ddp", "wfbp-a2a"]
    assert (summary["status"] == "ok").all(), summary[["scheme", "reason"]]
    assert (summary["nodes"] == 2).all() and (summary["workers_per_node"] == 1).all()
    raw = pd.read_parquet(part / "raw.parquet")
    assert raw.groupby("cell_id")["rank"].apply(lambda r: sorted(set(r))).tolist() == [[0, 1], [0, 1]]
    assert (summary["rank_start"] == "warm").all()  # forked by the zygote of each node (launchers/srun/warm.py)
    env = pd.read_parquet(part / "environment.parquet").iloc[0]
    assert (env["slurm_job_id"], env["slurm_nodelist"], env["hosts"]) == (job, "n[1-2]", "n1,n2")
    for cell in (part / "cells").iterdir():
        assert (cell / "hosts.workers").read_text().split() == ["n1", "n2"]  # one rank on each node
        assert (cell / "rank0.log").exists() and (cell / "rank1.log").exists()
    res = _cli("slurm", "status", run)
    assert res.exit_code == 0 and f"{job}\tCOMPLETED" in res.output and "cells: 2 ok" in res.output, res.output
    res = _cli("slurm", "collect", run, "-o", run.parent / "two-node-merged")
    assert res.exit_code == 0, res.output
    merged = pd.read_parquet(run.parent / "two-node-merged" / "summary.parquet")
    assert sorted(merged["cell_id"]) == sorted(summary["cell_id"])
    assert json.loads((run.parent / "two-node-merged" / "slurm-jobs.json").read_text())[0]["job_id"] == job


@pytest.mark.root
def test_warm_ranks_in_an_allocation_a_killed_rank_fails_its_cell_only(jobs, tmp_path):
    """Inside salloc the srun launcher forks each cell's ranks from one zygote per node (one long step,
    launchers/srun/warm.py): rows say warm; a rank SIGKILLed mid-cell fails that cell and the next one runs;
    nothing of the run is left once the allocation's command ends."""
    sweep = _sweep(tmp_path, "warm", schemes=["ddp", "wfbp-a2a"], iters=5)
    out = tmp_path / "warm-run"
    env = {**os.environ, "DDLBENCH_FAULT": "hang:1:2:ddp"}  # rank 1 of the ddp cell stops at iteration 2
    driver = subprocess.Popen(
        [
            "salloc",
            "-N2",
            "--ntasks-per-node=1",
            "--time=10",
            sys.executable,
            "-m",
            "harness.cli.main",
            "sweep",
            str(sweep),
            "--output",
            str(out),
            "--no-progress",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )
    killed = []
    deadline = time.monotonic() + JOB_TIMEOUT_S
    while driver.poll() is None and not killed and time.monotonic() < deadline:
        for log in out.glob("cells/*.ddp.*/rank1.log"):
            if "injected fault: hang" in log.read_text(errors="replace"):
                [pid] = rank_pids(log.parent, rank=1)
                parent = " ".join(psutil.Process(psutil.Process(pid).ppid()).cmdline())
                assert "harness.warm.zygote --tcp" in parent, parent  # forked by its node's zygote
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
        time.sleep(0.2)
    output = driver.communicate(timeout=JOB_TIMEOUT_S)[0]
    assert killed, f"the hung rank was never found: {output}"
    s = pd.read_parquet(out / "summary.parquet").set_index("scheme")
    assert s.loc["ddp", "status"] == "failed" and s.loc["ddp", "reason"].startswith("rank 1 died (SIGKILL)"), s[
        "reason"
    ]
    assert s.loc["wfbp-a2a", "status"] == "ok" and s.loc["wfbp-a2a", "rank_start"] == "warm", output
    assert s.loc["wfbp-a2a", "nodes"] == 2 and 0 < s.loc["wfbp-a2a", "startup_s"] < 60
    assert bool(pd.read_parquet(out / "environment.parquet")["warm_ranks"].iloc[0])
    assert sorted(p.name for p in (out / "zygotes").glob("zygote.*.json")) == ["zygote.n1.json", "zygote.n2.json"]
    print(f"\nwarm under srun: startup_s {s['startup_s'].round(2).to_dict()}")
    left = subprocess.run(["pgrep", "-f", f"harness.warm.zygote --tcp {out}"], capture_output=True, text=True).stdout
    assert not left.split() and not rank_pids(out), f"left after the allocation's command: {left}"


@pytest.mark.root
def test_crashing_worker_is_a_failed_cell_and_the_sweep_completes(jobs):
    """The sweep goes on past the failed cell (its rows are all there), and the job ends FAILED: `ddlbench
    sweep` exits 1 when a cell failed, so Slurm's state tells the user to look."""
    run, job, _ = jobs["crash"]
    assert wait_job(job, timeout_s=JOB_TIMEOUT_S) == "FAILED"
    summary = pd.read_parquet(run / "crash-n2" / "summary.parquet").set_index("scheme")
    assert summary.loc["local", "status"] == "ok"
    assert summary.loc["ddp", "status"] == "failed"
    assert summary.loc["ddp", "reason"] == "rank 1 died (exit code 17)"
    assert "injected fault: crash at iteration 1" in summary.loc["ddp", "log_tail"]


@pytest.mark.root
def test_submit_checks_cpus_and_controller(slurm, tmp_path):
    res = _cli("slurm", "submit", _sweep(tmp_path), "--nodes", "2", "--tasks-per-node", "5", "--output", tmp_path / "r")
    _one_line_error(res, "need 5 CPUs per node, but the nodes have 4")
    dead = tmp_path / "slurm.conf"  # the same cluster, but a controller port nobody listens on
    dead.write_text(
        "".join(
            f"{ln}\n"
            for ln in Path("/etc/slurm/slurm.conf").read_text().splitlines()
            if not ln.startswith("SlurmctldPort=")
        )
        + "SlurmctldPort=1\nMessageTimeout=2\n"
    )
    res = _cli(
        "slurm", "submit", _sweep(tmp_path), "--nodes", "2", "--output", tmp_path / "r2", env={"SLURM_CONF": str(dead)}
    )
    _one_line_error(res, "controller is unreachable")


if __name__ == "__main__" and "--regenerate" in sys.argv:
    for name, text in submit_references().items():
        (DATA / name).write_text(text)
        print("wrote", (DATA / name).relative_to(ROOT))
    for name, text in example_scripts().items():
        (ROOT / "slurm" / name).write_text(text)
        print("wrote", Path("slurm") / name)
    for name, text in example_sweeps().items():
        (ROOT / "slurm" / "sweeps" / name).write_text(text)
        print("wrote", Path("slurm") / "sweeps" / name)
    for stale in set(p.name for p in (ROOT / "slurm").glob("*.sbatch")) - set(example_scripts()):
        print("not generated any more, delete it:", Path("slurm") / stale)


def test_cuda_ranks_get_their_share_of_the_node_cpus(tmp_path):
    """One CPU per GPU rank would serialise the main, autograd and NCCL threads: a CUDA rank gets the
    node's CPUs over its tasks, a CPU rank its torch threads."""
    alloc = Allocation("9", ("n1", "n2"), 4, (32, 32))
    [gpu] = _plan(_cell(scheme="ddp", servers=0, workers=8, device="cuda"), alloc, tmp_path, "a", 1, ("w",))
    assert "--cpus-per-task=8" in gpu.argv
    [cpu] = _plan(_cell(scheme="ddp", servers=0, workers=8), alloc, tmp_path, "a", 1, ("w",))
    assert "--cpus-per-task=1" in cpu.argv
