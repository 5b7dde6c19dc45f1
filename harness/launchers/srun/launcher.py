"""In-allocation launcher: run one cell as a Slurm job step, from inside sbatch or salloc.

    salloc -N2 --ntasks-per-node=1 ddlbench sweep slurm/sweeps/cpu-tiny.yaml   # srun chosen by itself
    ddlbench sweep FILE.yaml --launcher srun                                   # or say so

`launch_cell_srun(cell, cell_dir)` keeps the contract of a launcher's `launch` (harness/contracts/launcher.py):
rank logs rank<r>.log in cell_dir, rank 0's result.json returned, CellFailed(reason, log tail) on the first
failed rank or at the cell's timeout, nothing left running afterwards.

Placement: the workers fill the first `cell.nodes` nodes of the allocation in blocks (rank 0 on the
first node, which is also the rendezvous host); parameter servers follow the cell's `server_hosts`
(docs/ARCHITECTURE.md, "Server placement"): on the nodes after the workers' when the allocation has
spare nodes (auto, dedicated), else round-robin onto the worker nodes (auto, colocated); the result
records which (dist.server_hosts). The exact task -> node map is
given to srun as a host file (`--distribution=arbitrary`, SLURM_HOSTFILE; `man srun`). Steps ask for
no GPUs, so they get all of the job's GPUs on their nodes (Slurm's default for a step without --gres);
each worker takes GPU number LOCAL_RANK (harness.rank.worker).

Each backend starts the way its users start it under Slurm: its package plans the steps
(its `SrunRecipe.plan`, harness/contracts/recipes/srun.py, over the context context.py makes), may run a
service around them (`SrunRecipe.session`: Horovod's rendezvous server), and defines the shim styles that give each
task its framework's variables (`python -m harness.rank.srun_task STYLE -- ARGV`). This module only
runs the steps, watches them and stops them (docs/ARCHITECTURE.md, "Launching").
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path

from harness.contracts.backend import rank_env, recipe
from harness.contracts.hostlist import expand_tasks_per_node
from harness.contracts.launcher import Launcher, LauncherEntry, register
from harness.contracts.recipes.srun import Allocation, SrunRecipe, Step
from harness.core.atomic import write_json_atomic
from harness.core.errors import CellFailed, UserError
from harness.launchers.srun import tasks as srun_tasks
from harness.launchers.srun import warm as srun_warm
from harness.launchers.srun.context import SrunCellContext, nodes_for, place, server_hosts_in
from harness.launchers.srun.env import hostnames, node_addr
from harness.launchers.srun.steps import cell_port, failure_reason
from harness.procs.argv import WORKER_MODULE, python_argv, worker_argv, write_cell
from harness.procs.crash import with_rank_error
from harness.procs.env import placed_now
from harness.procs.logs import log_tail
from harness.procs.ports import usable_port
from harness.procs.supervisor import Ended, Proc, watch
from harness.warm import spawn

STOP_GRACE_S = 10.0
"""After SIGTERM, how long srun may take to end its step before the step is scancel'led and srun killed."""
# Variables a step must not inherit from the batch environment: torch-style rank variables (the
# harness prefers them over SLURM_*, harness.launchers.identity) and srun options given as variables
# (`man srun`, INPUT ENVIRONMENT VARIABLES) that would fight the step's own layout.
_STALE = (
    "RANK",
    "WORLD_SIZE",
    "LOCAL_RANK",
    "LOCAL_WORLD_SIZE",
    "NODE_RANK",
    "GROUP_RANK",
    "MASTER_ADDR",
    "MASTER_PORT",
    "TORCHELASTIC_RUN_ID",
    "SLURM_NTASKS_PER_NODE",
    "SLURM_DISTRIBUTION",
    "SLURM_HOSTFILE",
    "SLURM_OVERCOMMIT",
    "SLURM_NTASKS",
    "SLURM_NPROCS",
)


def allocation_from_env(environ: Mapping[str, str] | None = None, use_scontrol: bool = True) -> Allocation:
    env = os.environ if environ is None else environ
    job = env.get("SLURM_JOB_ID") or env.get("SLURM_JOBID")
    nodelist = env.get("SLURM_JOB_NODELIST") or env.get("SLURM_NODELIST")
    if not job or not nodelist:
        raise UserError(
            "the srun launcher runs inside a Slurm allocation, and there is none here "
            "(SLURM_JOB_ID unset): use --launcher local, or submit with `ddlbench slurm submit`"
        )
    try:
        nodes = tuple(hostnames(nodelist, use_scontrol))
        tpn = env.get("SLURM_NTASKS_PER_NODE") or env.get("SLURM_TASKS_PER_NODE", "1")
        per_node = expand_tasks_per_node(tpn)[0]
        cpus = expand_tasks_per_node(env.get("SLURM_JOB_CPUS_PER_NODE", "") or f"{per_node}(x{len(nodes)})")
    except ValueError as e:
        raise UserError(f"cannot read this allocation's layout ({e}); run inside sbatch/salloc") from None
    here = env.get("SLURMD_NODENAME") or _this_node(nodes, use_scontrol)
    return Allocation(job_id=job, nodes=nodes, tasks_per_node=max(1, per_node), cpus_per_node=tuple(cpus), here=here)


def _this_node(nodes: tuple[str, ...], use_scontrol: bool) -> str:
    """The first node, when its address is this host's (salloc runs its command on the submit host,
    which may be that node; in slurm/local every node is this host); else ""."""
    mine = {"127.0.0.1", "localhost", socket.gethostname(), socket.getfqdn()}
    with contextlib.suppress(OSError):
        mine |= {socket.gethostbyname(socket.gethostname())}
    first = nodes[0] if nodes else ""
    if first and (first in mine or (use_scontrol and node_addr(first) in mine)):
        return first
    return ""


def step_environment(base: Mapping[str, str], step: Step) -> dict[str, str]:
    env = {k: v for k, v in base.items() if k not in _STALE}
    env.update(step.env)
    return env


def launch_cell_srun(cell, cell_dir: Path, placement=None, command: tuple[str, ...] | None = None) -> Path:
    """Run every rank of `cell` as a step of the current allocation; return rank 0's result.json,
    or raise CellFailed. `placement` is ignored (the allocation places); `command` replaces the
    worker argv (tests run probes through the same path)."""
    alloc = allocation_from_env()
    cell_dir = cell_dir.resolve()
    write_cell(cell, cell_dir)
    result = cell_dir / "result.json"
    result.unlink(missing_ok=True)
    backend = recipe(cell.backend, SrunRecipe)
    workers, _ = place(cell, alloc)
    port = usable_port(cell_port(alloc.job_id, cell.cell_id), on_this_host=workers[0] == alloc.here)
    command = tuple(command or (*python_argv(), *worker_argv(cell_dir)))
    ctx = SrunCellContext(
        cell,
        alloc,
        cell_dir,
        node_addr(workers[0]),
        port,
        command,
        backend.variant(os.environ),
        extra_env={**cell.network_vars(), **rank_env(cell), **placed_now()},
        addr_of=node_addr,
    )
    with backend.session(ctx) as ready:
        steps = backend.plan(ready)
        tasks = srun_tasks.warm_tasks(steps)
        zygotes = tasks and spawn.resource(
            "srun",
            lambda: srun_warm.NodeZygotes(
                alloc, cell_dir.parent.parent / "zygotes", step_environment(os.environ, Step("zygotes", ()))
            ),
        )
        if zygotes and zygotes.usable():  # warm: forked by each node's zygote (launchers/srun/warm.py)
            for step in steps:
                _hostfile(step, cell_dir)  # the placement on record, as a cold step leaves it
            srun_warm.run_tasks(zygotes, tasks, cell.timeout_s, cell_dir)
        else:
            _run_steps(steps, cell, cell_dir)
    if not result.exists():
        raise CellFailed("rank 0 finished without writing result.json", _tail(cell_dir))
    data = json.loads(result.read_text())  # where the servers ran: dedicated | colocated ("" without)
    data.setdefault("dist", {})["server_hosts"] = server_hosts_in(cell, alloc)
    write_json_atomic(result, data)
    return result


def _run_steps(steps: list[Step], cell, cell_dir: Path) -> None:
    procs: list[tuple[Step, subprocess.Popen]] = []
    logs = []
    try:
        for step in steps:
            env = step_environment(os.environ, step)
            if step.hosts:
                env["SLURM_HOSTFILE"] = str(_hostfile(step, cell_dir))
            log = open(cell_dir / ("srun.log" if step.main else f"srun.{step.role}.log"), "a")  # noqa: SIM115 - closed after the step
            logs.append(log)
            procs.append(
                (
                    step,
                    subprocess.Popen(
                        list(step.argv), stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
                    ),
                )
            )
        _watch(procs, cell.timeout_s, cell_dir)
    except Ended as e:
        _stop(procs)  # first, so that the tail holds what the ranks printed last
        raise CellFailed(e.reason, _tail(cell_dir, e.rank)) from None
    finally:
        _stop(procs)
        for log in logs:
            log.close()


def _hostfile(step: Step, cell_dir: Path) -> Path:
    """cell_dir/hosts.ROLE: the step's node for each task, one a line (srun's SLURM_HOSTFILE format)."""
    path = cell_dir / f"hosts.{step.role}"
    path.write_text("\n".join(step.hosts) + "\n")
    return path


def _watch(procs, timeout_s: float, cell_dir: Path) -> None:
    """The steps under the one supervisor (procs/supervisor.py)."""
    watch(
        [
            Proc(
                p,
                f"the {step.role} step",
                _log_name(step),
                lambda code, step=step: _failure(step, code, cell_dir),
                main=step.main,
            )
            for step, p in procs
        ],
        timeout_s,
        cell_dir,
        lambda running: Ended(f"timed out after {timeout_s:g} s; the step was cancelled", None),
        poll_s=0.1,
    )


def _log_name(step: Step) -> str:
    return "srun.log" if step.main else f"srun.{step.role}.log"


def _failure(step: Step, code: int | None, cell_dir: Path) -> Ended:
    name = _log_name(step)
    text = (cell_dir / name).read_text(errors="replace") if (cell_dir / name).exists() else ""
    if code == 0:
        return Ended(f"the {step.role} step ended before the workers", None)
    reason, rank = failure_reason(text, code, step.role)
    rank = rank if step.main else None  # main steps run the ranks
    return Ended(with_rank_error(reason, cell_dir, rank), rank)


TAIL_RANKS = 8
"""When no single rank is to blame (a timeout), the tail shows the logs of up to this many ranks."""


def _tail(cell_dir: Path, rank: int | None = 0) -> str:
    """The failing rank's log tail (then rank 0's), or every rank's when `rank` is None; then srun's."""
    if rank is not None:
        parts = [log_tail(cell_dir, first=rank)]
    else:
        logs = sorted(cell_dir.glob("rank*.log"), key=lambda f: int(f.stem[4:]) if f.stem[4:].isdigit() else 0)
        parts = [
            f"--- {f.name} ---\n" + "\n".join(f.read_text(errors="replace").splitlines()[-10:])
            for f in logs[:TAIL_RANKS]
        ]
    for f in [cell_dir / "srun.log", *sorted(cell_dir.glob("srun.*.log"))]:
        if f.exists() and f.stat().st_size:
            parts.append(f"--- {f.name} ---\n" + "\n".join(f.read_text(errors="replace").splitlines()[-10:]))
    return "\n".join(p for p in parts if p)


def _stop(procs) -> None:
    """End every step still running: SIGTERM to srun (it ends its step), then scancel the step, then
    SIGKILL srun."""
    alive = [(s, p) for s, p in procs if p.poll() is None]
    for _, p in alive:
        _signal(p, signal.SIGTERM)
    deadline = time.monotonic() + STOP_GRACE_S
    while any(p.poll() is None for _, p in alive) and time.monotonic() < deadline:
        time.sleep(0.1)
    for step, p in alive:
        if p.poll() is None:
            _scancel_step(step)
            _signal(p, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            p.wait(timeout=10)


def _signal(p: subprocess.Popen, sig: int) -> None:
    # SIGTERM to srun itself (it forwards it and ends its step); SIGKILL to its whole process group
    # (a framework launcher's children, ssh sessions).
    try:
        if sig == signal.SIGTERM:
            os.kill(p.pid, sig)
        else:
            os.killpg(p.pid, sig)
    except ProcessLookupError:
        pass


def _scancel_step(step: Step) -> None:
    name = next((a.split("=", 1)[1] for a in step.argv if a.startswith("--job-name=")), None)
    job = os.environ.get("SLURM_JOB_ID")
    if not (name and job and shutil.which("squeue") and shutil.which("scancel")):
        return
    try:
        out = subprocess.run(
            ["squeue", "--steps", "-h", "-j", job, "-o", "%i %j"], capture_output=True, text=True, timeout=10
        ).stdout
        for line in out.splitlines():
            step_id, _, step_name = line.partition(" ")
            if step_name.strip() == name:
                subprocess.run(["scancel", "--signal=KILL", step_id], capture_output=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        pass


def run_module_srun(cell, cell_dir: Path, placement=None, module: str = WORKER_MODULE) -> Path:
    """`launch_cell_srun` for ranks that run `module` instead of the worker (`python -m MODULE --cell
    cell.json --out cell_dir`, the worker's command line): the commbench timer between the allocation's
    nodes. They start as job steps (cold)."""
    cell_dir = cell_dir.resolve()
    return launch_cell_srun(cell, cell_dir, placement, (*python_argv(), *worker_argv(cell_dir, module)))


def _checked(cell, alloc: Allocation):
    server_hosts_in(cell, alloc)  # UserError: dedicated server hosts without a spare node
    return cell


def _launcher(environ: Mapping[str, str]) -> Launcher:
    alloc = allocation_from_env(environ)
    return Launcher(
        "srun",
        launch_cell_srun,
        lambda workers: nodes_for(alloc, workers),
        lambda cell: _checked(cell, alloc),
        {"hosts": ",".join(alloc.nodes)},
        hosts=len(alloc.nodes),
        run_module=run_module_srun,
        warm=False,
    )  # warm through its own zygotes


register(
    LauncherEntry(
        "srun",
        "a job step per cell inside a Slurm allocation; the default inside one",
        make=lambda request: _launcher(request.environ),
        detect=lambda request: bool(request.environ.get("SLURM_JOB_ID")),
    )
)
