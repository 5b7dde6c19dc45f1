"""What the srun launcher runs for one cell, as data: which node each rank goes to, and the srun (or
horovodrun) command lines with their variables. Pure functions; harness/launch/srun.py runs them.

    [step] = plan_cell(cell, Allocation("77", ("n1", "n2"), 1, (2, 2)), cell_dir, "10.0.0.1", 24001, argv)
    step.argv      # ('srun', '--job-name=ddlbench-...', '--nodes=2', '--ntasks=2', '--distribution=arbitrary', ...)
    step.hosts     # ('n1', 'n2'): the host file, one line per rank

See harness/launch/srun.py for how each backend is started, and why.
"""

from __future__ import annotations

import hashlib
import math
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from harness.cell import CellSpec
from harness.errors import CellFailed, UserError
from harness.launch.slurm_env import PORT_BASE, PORT_SPAN


# ------------------------------------------------------------------------------------ allocation

@dataclass(frozen=True)
class Allocation:
    job_id: str
    """SLURM_JOB_ID of the allocation this process runs in."""
    nodes: tuple[str, ...]
    """Node names, in Slurm's order (the batch script runs on the first)."""
    tasks_per_node: int
    """Workers per node the allocation was sized for (--ntasks-per-node)."""
    cpus_per_node: tuple[int, ...]
    """CPUs allocated on each node (SLURM_JOB_CPUS_PER_NODE)."""
    here: str = ""
    """The allocation's node this process runs on: SLURMD_NODENAME in a batch script; under salloc
    the node whose address is this host's, if any; else ""."""

    def nodes_for(self, workers: int) -> int:
        """Nodes a cell of `workers` workers spans: as few as the per-node task count allows."""
        need = math.ceil(workers / self.tasks_per_node)
        if need > len(self.nodes):
            raise UserError(
                f"{workers} workers at {self.tasks_per_node} per node need {need} nodes, but allocation "
                f"{self.job_id} has {len(self.nodes)}; ask for more nodes (sbatch --nodes) or drop the "
                f"larger worker counts from the sweep")
        return need


def cell_port(job_id: str, cell_id: str) -> int:
    """Rendezvous port of one cell's step: every cell of a job gets its own (a port the previous step
    just closed may still be in TIME_WAIT), derived without talking to anyone. Same range as
    slurm_env.port_for_job."""
    digest = int(hashlib.sha1(cell_id.encode()).hexdigest()[:8], 16)
    return PORT_BASE + (int(str(job_id).split("_")[0]) + digest) % PORT_SPAN


# ------------------------------------------------------------------------------------ step plans

@dataclass(frozen=True)
class Step:
    role: str
    """workers | servers | scheduler | horovodrun."""
    argv: tuple[str, ...]
    """The whole command (srun ... or horovodrun ...)."""
    hosts: tuple[str, ...] = ()
    """Host file: one node name per task, in rank order (srun --distribution=arbitrary)."""
    env: tuple[tuple[str, str], ...] = ()
    """Variables set for this step on top of the cleaned environment."""
    main: bool = True
    """The cell is done when the main steps end; the others (scheduler, servers) are then stopped."""


def place(cell: CellSpec, alloc: Allocation) -> tuple[list[str], list[str]]:
    """(node of each worker, node of each server): workers in blocks over the first cell.nodes nodes;
    servers on the spare nodes after them when there are any, else round-robin on the worker nodes."""
    n = cell.nodes
    if n > len(alloc.nodes):
        raise CellFailed(f"cell needs {n} nodes but allocation {alloc.job_id} has {len(alloc.nodes)}")
    per = math.ceil(cell.workers / n)
    workers = [alloc.nodes[r // per] for r in range(cell.workers)]
    spare = list(alloc.nodes[n:]) or list(alloc.nodes[:n])
    servers = [spare[i % len(spare)] for i in range(cell.servers)]
    return workers, servers


def _srun(alloc: Allocation, hosts: list[str], cpus: int, name: str, out: str, overlap: bool = False) -> list[str]:
    """srun options for one step whose task i runs on hosts[i]."""
    load: dict[str, int] = {}
    for h in hosts:
        load[h] = load.get(h, 0) + cpus
    have = dict(zip(alloc.nodes, alloc.cpus_per_node))
    argv = ["srun", f"--job-name={name}", f"--nodes={len(load)}", f"--ntasks={len(hosts)}",
            "--distribution=arbitrary", f"--cpus-per-task={cpus}", "--kill-on-bad-exit=1",
            f"--output={out}", "--input=none"]
    if any(c > have.get(h, c) for h, c in load.items()):
        argv.append("--overcommit")  # colocated servers: more tasks than CPUs the job holds there
    if overlap:
        argv.append("--overlap")     # shares CPUs with the workers' step
    return argv


def plan_cell(cell: CellSpec, alloc: Allocation, cell_dir: Path, master_addr: str, port: int,
              command: tuple[str, ...], style: str | None = None,
              rendezvous: tuple[str, int] | None = None, extra_env: dict | None = None) -> list[Step]:
    """The step(s) that run `cell` (pure). `command` is each rank's argv; `style` defaults to the
    cell's backend (horovodrun: see the module docstring); `rendezvous` is Horovod's server address;
    `extra_env` is set for every task."""
    style = style or cell.backend
    workers, servers = place(cell, alloc)
    name = f"ddlbench-{cell.cell_id}"
    out = str(cell_dir / "rank%t.log")
    cpus = max(1, cell.threads)
    common = {"MASTER_ADDR": master_addr, "MASTER_PORT": str(port), "PYTHONUNBUFFERED": "1",
              "OMP_NUM_THREADS": str(cell.threads), "MKL_NUM_THREADS": str(cell.threads), **(extra_env or {})}
    if style in ("horovod", "horovodrun"):
        common.update(horovod_knob_env(cell))
    shim = (sys.executable, "-m", "harness.launch.srun_task")
    if style == "torch":
        hosts = workers + servers
        return [Step("workers", tuple(_srun(alloc, hosts, cpus, name, out) + list(command)), tuple(hosts),
                     _env(common))]
    if style == "deepspeed":
        hosts = workers + servers
        argv = _srun(alloc, hosts, cpus, name, out) + [*shim, "torch", "--", *command]
        return [Step("workers", tuple(argv), tuple(hosts), _env(common))]
    if style == "horovod":
        if rendezvous is None:
            raise ValueError("horovod over srun needs the rendezvous server's address")
        env = {**common, "HOROVOD_GLOO_RENDEZVOUS_ADDR": rendezvous[0],
               "HOROVOD_GLOO_RENDEZVOUS_PORT": str(rendezvous[1])}
        argv = _srun(alloc, workers, cpus, name, out) + [*shim, "horovod", "--", *command]
        return [Step("workers", tuple(argv), tuple(workers), _env(env))]
    if style == "horovodrun":
        slots = ",".join(f"{h}:{workers.count(h)}" for h in dict.fromkeys(workers))
        if len(set(workers)) == 1 and workers[0] == alloc.here:
            slots = f"localhost:{cell.workers}"  # one node, this one: no ssh needed
        flags = [f for k, flag in (("HOROVOD_FUSION_THRESHOLD", "--fusion-threshold-mb"),
                                   ("HOROVOD_CYCLE_TIME", "--cycle-time-ms")) if k in common
                 for f in (flag, _knob_flag(k, common[k]))]
        argv = [_beside_python("horovodrun"), "--gloo", "-np", str(cell.workers), "-H", slots, *flags,
                *shim, "horovodrun", "--log-dir", str(cell_dir), "--", *command]
        return [Step("horovodrun", tuple(argv), env=_env(common))]
    if style == "byteps":
        env = {**common, "DMLC_NUM_WORKER": str(len(set(workers))), "DMLC_NUM_SERVER": str(cell.servers),
               "DMLC_PS_ROOT_URI": master_addr, "DMLC_PS_ROOT_PORT": str(port + 1)}
        sched = _srun(alloc, [workers[0]], 1, name + ".scheduler", str(cell_dir / "scheduler.log"), True)
        serv = _srun(alloc, servers, 1, name + ".servers", str(cell_dir / "server%t.log"), True)
        work = _srun(alloc, workers, cpus, name, out)
        return [Step("scheduler", tuple(sched + ["env", "DMLC_ROLE=scheduler", "bpslaunch"]), (workers[0],),
                     _env(env), main=False),
                Step("servers", tuple(serv + ["env", "DMLC_ROLE=server", "bpslaunch"]), tuple(servers),
                     _env(env), main=False),
                Step("workers", tuple(work + [*shim, "byteps", "--", *command]), tuple(workers), _env(env))]
    raise UserError(f"the srun launcher does not know backend {style!r}; it starts torch, deepspeed, "
                    f"horovod (or horovodrun) and byteps")


def _env(d: dict) -> tuple[tuple[str, str], ...]:
    return tuple(sorted(d.items()))


MB = 1 << 20


def horovod_knob_env(cell: CellSpec) -> dict[str, str]:
    """The `horovod` scheme's knobs as the variables hvd.init() reads (horovodrun sets the same from
    --fusion-threshold-mb / --cycle-time-ms; harness/schemes/horovod_native.py checks them)."""
    knobs = cell.knobs or {}
    env = {}
    if knobs.get("fusion_threshold_mb") is not None:
        env["HOROVOD_FUSION_THRESHOLD"] = str(int(knobs["fusion_threshold_mb"]) * MB)
    if knobs.get("cycle_time_ms") is not None:
        env["HOROVOD_CYCLE_TIME"] = str(float(knobs["cycle_time_ms"]))
    return env


def _beside_python(tool: str) -> str:
    """A console script of this interpreter's environment (batch jobs may not have it on PATH)."""
    exe = Path(sys.executable).parent / tool
    return str(exe) if exe.exists() else tool


def _knob_flag(var: str, value: str) -> str:
    return str(int(value) // MB) if var == "HOROVOD_FUSION_THRESHOLD" else value


# ------------------------------------------------------------------------------- srun's messages

_TASK_EXIT = re.compile(r"task (\d+): Exited with exit code (\d+)")
_TASK_SIGNAL = re.compile(r"task (\d+): (Killed|Terminated|Segmentation fault|Aborted|Bus error)")


def failure_reason(srun_log: str, code: int | None, role: str = "workers") -> tuple[str, int]:
    """(reason, failing rank) from srun's own messages: the first task that exited non-zero, else the
    first that a signal ended, else srun's exit status (pure)."""
    m = _TASK_EXIT.search(srun_log)
    if m and m.group(2) != "0":
        rank = int(m.group(1))
        return f"{_who(role)} {rank} died (exit code {m.group(2)})", rank
    m = _TASK_SIGNAL.search(srun_log)
    if m:
        return f"{_who(role)} {int(m.group(1))} died ({m.group(2).lower()})", int(m.group(1))
    last = [ln for ln in srun_log.splitlines() if ln.strip()][-1:] or ["no message"]
    what = f"exit code {code}" if code is not None and code >= 0 else f"signal {-(code or 0)}"
    return f"{role} step ended ({what}): {last[0].strip()}", 0


def _who(role: str) -> str:
    return {"workers": "rank", "servers": "server", "scheduler": "scheduler"}.get(role, "rank")
