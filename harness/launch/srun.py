"""In-allocation launcher: run one cell as a Slurm job step, from inside sbatch or salloc.

    salloc -N2 --ntasks-per-node=1 ddlbench sweep slurm/sweeps/cpu-tiny.yaml   # srun chosen by itself
    ddlbench sweep FILE.yaml --launcher srun                                   # or say so

`launch_cell_srun(cell, cell_dir)` keeps the contract of harness.launch.local.launch_cell: rank logs
rank<r>.log in cell_dir, rank 0's result.json returned, CellFailed(reason, log tail) on the first
failed rank or at the cell's timeout, nothing left running afterwards.

Placement: the workers fill the first `cell.nodes` nodes of the allocation in blocks (rank 0 on the
first node, which is also the rendezvous host); parameter servers go on the nodes after them when the
allocation has spare nodes, else round-robin onto the worker nodes. The exact task -> node map is
given to srun as a host file (`--distribution=arbitrary`, SLURM_HOSTFILE; `man srun`). Steps ask for
no GPUs, so they get all of the job's GPUs on their nodes (Slurm's default for a step without --gres);
each worker takes GPU number LOCAL_RANK (harness.worker).

Each backend starts the way its users start it under Slurm (DESIGN.md section 5):
  torch       one srun task per rank; the worker reads SLURM_PROCID & co. (harness.launch.slurm_env)
  deepspeed   the same, each task given the torch variables (RANK, LOCAL_RANK, ...) deepspeed reads
  horovod     srun tasks with Horovod's gloo variables (HOROVOD_RANK, ...); this process runs the
              rendezvous server horovodrun would run. DDLBENCH_HOROVOD_LAUNCH=horovodrun instead runs
              `horovodrun --gloo -H node:slots,...` from this (the first) node, reaching others by ssh.
  byteps      three concurrent steps: scheduler, servers (own nodes when spare), workers (DMLC_*).
The steps are planned by pure functions in harness/launch/srun_plan.py. The variables are set by `python -m harness.launch.srun_task STYLE -- ARGV` (harness/launch/srun_task.py),
a shim that reads the task's SLURM_* (or HOROVOD_*), exports the style's variables and execs ARGV.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping

from harness.cell import CellSpec
from harness.errors import CellFailed, UserError
from harness.launch.local import log_tail
from harness.launch.slurm_env import expand_tasks_per_node, hostnames, node_addr
from harness.launch.srun_plan import Allocation, Step, cell_port, failure_reason, place, plan_cell

LAUNCHERS = ("local", "srun")
STOP_GRACE_S = 10.0
"""After SIGTERM, how long srun may take to end its step before the step is scancel'led and srun killed."""
# Variables a step must not inherit from the batch environment: torch-style rank variables (the
# harness prefers them over SLURM_*, harness.launch.env) and srun options given as variables
# (`man srun`, INPUT ENVIRONMENT VARIABLES) that would fight the step's own layout.
_STALE = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "NODE_RANK", "GROUP_RANK",
          "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RUN_ID", "SLURM_NTASKS_PER_NODE",
          "SLURM_DISTRIBUTION", "SLURM_HOSTFILE", "SLURM_OVERCOMMIT", "SLURM_NTASKS", "SLURM_NPROCS")


# ------------------------------------------------------------------------------------ allocation

def allocation_from_env(environ: Mapping[str, str] | None = None, use_scontrol: bool = True) -> Allocation:
    env = os.environ if environ is None else environ
    job = env.get("SLURM_JOB_ID") or env.get("SLURM_JOBID")
    nodelist = env.get("SLURM_JOB_NODELIST") or env.get("SLURM_NODELIST")
    if not job or not nodelist:
        raise UserError("the srun launcher runs inside a Slurm allocation, and there is none here "
                        "(SLURM_JOB_ID unset): use --launcher local, or submit with `ddlbench slurm submit`")
    try:
        nodes = tuple(hostnames(nodelist, use_scontrol))
        tpn = env.get("SLURM_NTASKS_PER_NODE") or env.get("SLURM_TASKS_PER_NODE", "1")
        per_node = expand_tasks_per_node(tpn)[0]
        cpus = expand_tasks_per_node(env.get("SLURM_JOB_CPUS_PER_NODE", "") or f"{per_node}(x{len(nodes)})")
    except ValueError as e:
        raise UserError(f"cannot read this allocation's layout ({e}); run inside sbatch/salloc") from None
    here = env.get("SLURMD_NODENAME") or _this_node(nodes, use_scontrol)
    return Allocation(job_id=job, nodes=nodes, tasks_per_node=max(1, per_node), cpus_per_node=tuple(cpus),
                      here=here)


def _this_node(nodes: tuple[str, ...], use_scontrol: bool) -> str:
    """The first node, when its address is this host's (salloc runs its command on the submit host,
    which may be that node; in slurm/local every node is this host); else ""."""
    mine = {"127.0.0.1", "localhost", socket.gethostname(), socket.getfqdn()}
    try:
        mine |= {socket.gethostbyname(socket.gethostname())}
    except OSError:
        pass
    first = nodes[0] if nodes else ""
    if first and (first in mine or (use_scontrol and node_addr(first) in mine)):
        return first
    return ""


# --------------------------------------------------------------------------------------- launcher

def worker_command(cell_dir: Path) -> tuple[str, ...]:
    return (sys.executable, "-m", "harness.worker", "--cell", str(cell_dir / "cell.json"), "--out", str(cell_dir))


def step_environment(base: Mapping[str, str], step: Step) -> dict[str, str]:
    env = {k: v for k, v in base.items() if k not in _STALE}
    env.update(step.env)
    return env


def launch_cell_srun(cell: CellSpec, cell_dir: Path, placement=None,
                     command: tuple[str, ...] | None = None) -> Path:
    """Run every rank of `cell` as a step of the current allocation; return rank 0's result.json,
    or raise CellFailed. `placement` is ignored (the allocation places); `command` replaces the
    worker argv (tests run probes through the same path)."""
    alloc = allocation_from_env()
    cell_dir = cell_dir.resolve()
    cell_dir.mkdir(parents=True, exist_ok=True)
    (cell_dir / "cell.json").write_text(cell.to_json())
    result = cell_dir / "result.json"
    result.unlink(missing_ok=True)
    workers, _ = place(cell, alloc)
    master = node_addr(workers[0])
    port = _usable_port(cell_port(alloc.job_id, cell.cell_id), on_this_host=workers[0] == alloc.here)
    style = cell.backend
    if style == "horovod" and os.environ.get("DDLBENCH_HOROVOD_LAUNCH", "srun") == "horovodrun":
        style = "horovodrun"
    server = _horovod_rendezvous(cell, alloc, workers) if style == "horovod" else None
    try:
        rdv = (node_addr(alloc.here) if alloc.here else socket.gethostname(), server[1]) if server else None
        steps = plan_cell(cell, alloc, cell_dir, master, port, command or worker_command(cell_dir), style, rdv,
                          _backend_env(cell))
        _run_steps(steps, cell, cell_dir)
    finally:
        if server:
            server[0].stop()
    if not result.exists():
        raise CellFailed("rank 0 finished without writing result.json", _tail(cell_dir))
    return result


def _backend_env(cell: CellSpec) -> dict[str, str]:
    """Variables a backend's own single-box launcher would set too."""
    if cell.backend == "deepspeed":
        try:  # where the installer put DeepSpeed's compiled ops (else each rank compiles them again)
            from harness.backends.deepspeed import extensions_dir
        except ImportError:
            return {}
        return {"TORCH_EXTENSIONS_DIR": extensions_dir()}
    return {}


def _usable_port(port: int, on_this_host: bool) -> int:
    """`port`, or the next free one when rank 0 will listen on this very host and it is taken."""
    if not on_this_host:
        return port
    for p in range(port, port + 64):
        with socket.socket() as s:
            try:
                s.bind(("", p))
                return p
            except OSError:
                continue
    return port


def _horovod_rendezvous(cell: CellSpec, alloc: Allocation, workers: list[str]):
    """Start the HTTP rendezvous server horovodrun would start, with the same slot plan."""
    try:
        from horovod.runner.common.util.hosts import get_host_assignments, parse_hosts
        from horovod.runner.http.http_server import RendezvousServer
    except ImportError:
        raise CellFailed("backend horovod needs the horovod package on the node running the sweep; "
                         "install it (scripts/install_frameworks.sh horovod)") from None
    slots = ",".join(f"{h}:{workers.count(h)}" for h in dict.fromkeys(workers))
    server = RendezvousServer(verbose=0)
    port = server.start()
    server.init(get_host_assignments(parse_hosts(slots), cell.workers))
    return server, port


class _Ended(Exception):
    """A cell ended badly: the reason, and the rank whose log matters most (None: every rank's)."""

    def __init__(self, reason: str, rank: int | None):
        super().__init__(reason)
        self.reason, self.rank = reason, rank


def _run_steps(steps: list[Step], cell: CellSpec, cell_dir: Path) -> None:
    procs: list[tuple[Step, subprocess.Popen]] = []
    logs = []
    try:
        for step in steps:
            env = step_environment(os.environ, step)
            if step.hosts:
                hostfile = cell_dir / f"hosts.{step.role}"
                hostfile.write_text("\n".join(step.hosts) + "\n")
                env["SLURM_HOSTFILE"] = str(hostfile)
            log = open(cell_dir / ("srun.log" if step.main else f"srun.{step.role}.log"), "a")
            logs.append(log)
            procs.append((step, subprocess.Popen(list(step.argv), stdout=log, stderr=subprocess.STDOUT,
                                                 env=env, start_new_session=True)))
        _watch(procs, cell.timeout_s, cell_dir)
    except _Ended as e:
        _stop(procs)  # first, so that the tail holds what the ranks printed last
        raise CellFailed(e.reason, _tail(cell_dir, e.rank)) from None
    finally:
        _stop(procs)
        for log in logs:
            log.close()


def _watch(procs, timeout_s: float, cell_dir: Path) -> None:
    deadline = time.monotonic() + timeout_s
    main = [(s, p) for s, p in procs if s.main]
    while True:
        for step, p in procs:
            code = p.poll()
            if code not in (None, 0) or (code == 0 and not step.main and any(q.poll() is None for _, q in main)):
                raise _failure(step, code, cell_dir)
        if all(p.poll() == 0 for _, p in main):
            return
        if time.monotonic() > deadline:
            raise _Ended(f"timed out after {timeout_s:g} s; the step was cancelled", None)
        time.sleep(0.1)


def _failure(step: Step, code: int | None, cell_dir: Path) -> _Ended:
    name = "srun.log" if step.main else f"srun.{step.role}.log"
    text = (cell_dir / name).read_text(errors="replace") if (cell_dir / name).exists() else ""
    if code == 0:
        return _Ended(f"the BytePS {step.role} ended before the workers", None)
    reason, rank = failure_reason(text, code, step.role)
    return _Ended(reason, rank if step.role in ("workers", "horovodrun") else None)


TAIL_RANKS = 8
"""When no single rank is to blame (a timeout), the tail shows the logs of up to this many ranks."""


def _tail(cell_dir: Path, rank: int | None = 0) -> str:
    """The failing rank's log tail (then rank 0's), or every rank's when `rank` is None; then srun's."""
    if rank is not None:
        parts = [log_tail(cell_dir, first=rank)]
    else:
        logs = sorted(cell_dir.glob("rank*.log"), key=lambda f: int(f.stem[4:]) if f.stem[4:].isdigit() else 0)
        parts = [f"--- {f.name} ---\n" + "\n".join(f.read_text(errors="replace").splitlines()[-10:])
                 for f in logs[:TAIL_RANKS]]
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
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass


def _signal(p: subprocess.Popen, sig: int) -> None:
    # SIGTERM to srun itself (it forwards it and ends its step); SIGKILL to its whole process group
    # (horovodrun's children, ssh sessions).
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
        out = subprocess.run(["squeue", "--steps", "-h", "-j", job, "-o", "%i %j"], capture_output=True,
                             text=True, timeout=10).stdout
        for line in out.splitlines():
            step_id, _, step_name = line.partition(" ")
            if step_name.strip() == name:
                subprocess.run(["scancel", "--signal=KILL", step_id], capture_output=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        pass


# ----------------------------------------------------------------------------- sweep integration

@dataclass(frozen=True)
class SweepLauncher:
    name: str
    """local | srun."""
    launch: Callable | None
    """launch_cell-compatible function; None = the default local spawner."""
    nodes_for: Callable[[int], int] | None
    """Nodes a cell of N workers spans (cell.nodes); None = 1."""
    env_extra: dict
    """Facts for the environment table (hosts of the allocation)."""


def choose_launcher(name: str | None = None, environ: Mapping[str, str] | None = None) -> SweepLauncher:
    """`ddlbench sweep --launcher`: srun inside an allocation (SLURM_JOB_ID set), local otherwise."""
    env = os.environ if environ is None else environ
    name = name or ("srun" if env.get("SLURM_JOB_ID") else "local")
    if name not in LAUNCHERS:
        raise UserError(f"unknown launcher {name!r}; available: {', '.join(LAUNCHERS)}")
    if name == "local":
        return SweepLauncher("local", None, None, {})
    alloc = allocation_from_env(env)
    return SweepLauncher("srun", launch_cell_srun, alloc.nodes_for, {"hosts": ",".join(alloc.nodes)})
