"""What the srun launcher runs for one cell, as data: which node each rank goes to, and the srun
command lines with their variables (docs/ARCHITECTURE.md, "Launching"). Pure functions, no backend:
each backend turns an `SrunContext` into its own `Step`s (its `SrunRecipe.plan`, recipe.py), with the generic
pieces here; harness/launchers/srun/launcher.py runs them.

    ctx = SrunContext(cell, Allocation("77", ("n1", "n2"), 1, (2, 2)), cell_dir, "10.0.0.1", 24001, argv)
    ctx.srun(ctx.workers, 1, ctx.name, ctx.out)   # ['srun', '--job-name=ddlbench-...', '--nodes=2', ...]

Nothing here imports the cell or the backends, so that backends can build on it without a cycle.
"""

from __future__ import annotations

import hashlib
import math
import re
import signal
import sys
from dataclasses import dataclass, field
from pathlib import Path

from harness.core.errors import CellFailed, UserError
from harness.contracts.rendezvous import PORT_BASE, PORT_SPAN
from harness.procs.supervisor import signal_name

SHIM_MODULE = "harness.rank.srun_task"
"""The per-task shim that gives a task its framework's variables (harness/launchers/srun/task.py, run as a
process by harness/rank/srun_task.py, which loads the backends first)."""


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
    harness/contracts/rendezvous.port_for_job."""
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


def server_hosts_in(cell, alloc: Allocation) -> str:
    """What the cell's `server_hosts` (auto | dedicated | colocated) resolves to in `alloc`: dedicated
    when asked, or auto and the allocation has nodes beyond the cell's worker nodes; "" without servers.
    UserError when dedicated is asked and no node is spare (docs/ARCHITECTURE.md, "Server placement")."""
    if not cell.servers:
        return ""
    mode = getattr(cell, "server_hosts", "auto")
    spare = len(alloc.nodes) - cell.nodes
    if mode == "dedicated" and spare < 1:
        raise UserError(f"--server-hosts dedicated needs a node without workers, and allocation {alloc.job_id} "
                        f"has {len(alloc.nodes)} node(s), all for the {cell.workers} workers; ask for one more "
                        f"node (sbatch --nodes) or use --server-hosts colocated/auto")
    return "dedicated" if mode != "colocated" and spare > 0 else "colocated"


def place(cell, alloc: Allocation) -> tuple[list[str], list[str]]:
    """(node of each worker, node of each server): workers in blocks over the first cell.nodes nodes;
    servers on the spare nodes after them when the placement is dedicated (server_hosts_in), else
    round-robin on the worker nodes."""
    n = cell.nodes
    if n > len(alloc.nodes):
        raise CellFailed(f"cell needs {n} nodes but allocation {alloc.job_id} has {len(alloc.nodes)}")
    per = math.ceil(cell.workers / n)
    workers = [alloc.nodes[r // per] for r in range(cell.workers)]
    dedicated = server_hosts_in(cell, alloc) == "dedicated"
    spare = list(alloc.nodes[n:]) if dedicated else list(alloc.nodes[:n])
    servers = [spare[i % len(spare)] for i in range(cell.servers)]
    return workers, servers


def srun_options(alloc: Allocation, hosts: list[str], cpus: int, name: str, out: str, overlap: bool = False) -> list[str]:
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


def env_items(d: dict) -> tuple[tuple[str, str], ...]:
    """A step's variables in the form Step.env holds them (sorted: plans are compared in tests)."""
    return tuple(sorted((k, str(v)) for k, v in d.items()))


def beside_python(tool: str) -> str:
    """A console script of this interpreter's environment (batch jobs may not have it on PATH)."""
    exe = Path(sys.executable).parent / tool
    return str(exe) if exe.exists() else tool


@dataclass(frozen=True)
class SrunContext:
    """Everything a backend needs to plan one cell's steps in an allocation."""

    cell: object
    """The resolved CellSpec."""
    alloc: Allocation
    """The allocation the steps run in."""
    cell_dir: Path
    """Where rank logs and result.json go."""
    master_addr: str
    """Rendezvous address (rank 0's node, as Slurm reaches it)."""
    port: int
    """Rendezvous port of this cell."""
    command: tuple[str, ...]
    """Each rank's argv (the worker, or a probe in tests)."""
    variant: str | None = None
    """A backend's launch variant (e.g. Horovod's `horovodrun` instead of srun tasks); None = default."""
    rendezvous: tuple[str, int] | None = None
    """A backend-run rendezvous service (Horovod's gloo HTTP server), once started."""
    extra_env: dict = field(default_factory=dict)
    """Variables every task gets beyond the common ones (backend and network choices)."""

    @property
    def placement(self) -> tuple[list[str], list[str]]:
        return place(self.cell, self.alloc)

    @property
    def workers(self) -> list[str]:
        return self.placement[0]

    @property
    def servers(self) -> list[str]:
        return self.placement[1]

    @property
    def name(self) -> str:
        return f"ddlbench-{self.cell.cell_id}"

    @property
    def out(self) -> str:
        return str(self.cell_dir / "rank%t.log")

    @property
    def cpus(self) -> int:
        """CPUs per task. A CUDA rank gets its share of the node's cores (the node's CPUs over its tasks):
        besides the main thread it runs autograd's device thread and NCCL's proxy and watchdog threads,
        which one core would serialise. A CPU rank gets its torch threads (one core per worker)."""
        if self.cell.device == "cuda" and self.alloc.cpus_per_node:
            return max(1, min(self.alloc.cpus_per_node) // max(1, self.alloc.tasks_per_node), self.cell.threads)
        return max(1, self.cell.threads)

    def common_env(self) -> dict[str, str]:
        t = str(self.cell.threads)
        return {"MASTER_ADDR": self.master_addr, "MASTER_PORT": str(self.port), "PYTHONUNBUFFERED": "1",
                "PYTHONSAFEPATH": "1", "OMP_NUM_THREADS": t, "MKL_NUM_THREADS": t, **self.extra_env}

    def srun(self, hosts: list[str], cpus: int, name: str, out: str, overlap: bool = False) -> list[str]:
        return srun_options(self.alloc, hosts, cpus, name, out, overlap)

    def shim(self, style: str) -> tuple[str, ...]:
        """`python -m harness.rank.srun_task STYLE`: put before `--` and the command."""
        return (sys.executable, "-m", SHIM_MODULE, style)


def all_ranks_step(ctx: SrunContext, prefix: tuple[str, ...] = ()) -> list[Step]:
    """The plain plan: one srun step whose tasks are every rank (workers, then servers), each running
    `prefix + command`; ranks read SLURM_* (or what the `prefix` shim sets)."""
    hosts = ctx.workers + ctx.servers
    argv = ctx.srun(hosts, ctx.cpus, ctx.name, ctx.out) + [*prefix, *ctx.command]
    return [Step("workers", tuple(argv), tuple(hosts), env_items(ctx.common_env()))]


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
        return f"{_who(role)} {int(m.group(1))} died ({signal_name(_SRUN_SIGNALS[m.group(2)])})", int(m.group(1))
    last = [ln for ln in srun_log.splitlines() if ln.strip()][-1:] or ["no message"]
    what = f"exit code {code}" if code is not None and code >= 0 else f"signal {-(code or 0)}"
    return f"{role} step ended ({what}): {last[0].strip()}", 0


_SRUN_SIGNALS = {"Killed": signal.SIGKILL, "Terminated": signal.SIGTERM, "Segmentation fault": signal.SIGSEGV,
                 "Aborted": signal.SIGABRT, "Bus error": signal.SIGBUS}
"""srun's words for the signal that ended a task (its 'task N: Segmentation fault' lines)."""


def _who(role: str) -> str:
    return {"workers": "rank", "servers": "server", "scheduler": "scheduler"}.get(role, "rank")
