"""One cell in a Slurm allocation, as the srun launcher places it and hands it to its backend's recipe
(docs/ARCHITECTURE.md, "Launcher" and "Launching"): which node each rank goes to, the nodes a cell spans, and
the `SrunContext` (harness/contracts/recipes/srun.py) a backend plans its steps from. Pure functions.

    ctx = SrunCellContext(cell, Allocation("77", ("n1", "n2"), 1, (2, 2)), cell_dir, "10.0.0.1", 24001, argv)
    ctx.srun(ctx.workers, 1, ctx.name, ctx.out)   # ['srun', '--job-name=ddlbench-...', '--nodes=2', ...]
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from harness.contracts.recipes.srun import SHIM_MODULE, Allocation, Step
from harness.core.errors import CellFailed, UserError


def nodes_for(alloc: Allocation, workers: int) -> int:
    """Nodes a cell of `workers` workers spans in `alloc`: as few as the per-node task count allows."""
    need = math.ceil(workers / alloc.tasks_per_node)
    if need > len(alloc.nodes):
        raise UserError(
            f"{workers} workers at {alloc.tasks_per_node} per node need {need} nodes, but allocation "
            f"{alloc.job_id} has {len(alloc.nodes)}; ask for more nodes (sbatch --nodes) or drop the "
            f"larger worker counts from the sweep"
        )
    return need


def server_hosts_in(cell, alloc: Allocation) -> str:
    """What the cell's `server_hosts` (auto | dedicated | colocated) resolves to in `alloc`: dedicated
    when asked, or auto and the allocation has nodes beyond the cell's worker nodes; "" without servers.
    UserError when dedicated is asked and no node is spare (docs/ARCHITECTURE.md, "Server placement")."""
    if not cell.servers:
        return ""
    mode = getattr(cell, "server_hosts", "auto")
    spare = len(alloc.nodes) - cell.nodes
    if mode == "dedicated" and spare < 1:
        raise UserError(
            f"--server-hosts dedicated needs a node without workers, and allocation {alloc.job_id} "
            f"has {len(alloc.nodes)} node(s), all for the {cell.workers} workers; ask for one more "
            f"node (sbatch --nodes) or use --server-hosts colocated/auto"
        )
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


def srun_options(
    alloc: Allocation, hosts: list[str], cpus: int, name: str, out: str, overlap: bool = False
) -> list[str]:
    """srun options for one step whose task i runs on hosts[i]."""
    load: dict[str, int] = {}
    for h in hosts:
        load[h] = load.get(h, 0) + cpus
    have = dict(zip(alloc.nodes, alloc.cpus_per_node))
    argv = [
        "srun",
        f"--job-name={name}",
        f"--nodes={len(load)}",
        f"--ntasks={len(hosts)}",
        "--distribution=arbitrary",
        f"--cpus-per-task={cpus}",
        "--kill-on-bad-exit=1",
        f"--output={out}",
        "--input=none",
    ]
    if any(c > have.get(h, c) for h, c in load.items()):
        argv.append("--overcommit")  # colocated servers: more tasks than CPUs the job holds there
    if overlap:
        argv.append("--overlap")  # shares CPUs with the workers' step
    return argv


@dataclass(frozen=True)
class SrunCellContext:
    """The srun launcher's `SrunContext` (harness/contracts/recipes/srun.py): one cell in an allocation."""

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
    addr_of: Callable[[str], str] = lambda node: node
    """A node's name -> the address the allocation's nodes reach it at (the srun launcher asks Slurm for its
    NodeAddr: node names need not resolve); a service a backend runs on this node announces this address."""

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
        return {
            "MASTER_ADDR": self.master_addr,
            "MASTER_PORT": str(self.port),
            "PYTHONUNBUFFERED": "1",
            "PYTHONSAFEPATH": "1",
            "OMP_NUM_THREADS": t,
            "MKL_NUM_THREADS": t,
            **self.extra_env,
        }

    def srun(self, hosts: list[str], cpus: int, name: str, out: str, overlap: bool = False) -> list[str]:
        return srun_options(self.alloc, hosts, cpus, name, out, overlap)

    def shim(self, style: str) -> tuple[str, ...]:
        """`python -m harness.rank.srun_task STYLE`: put before `--` and the command."""
        return (sys.executable, "-m", SHIM_MODULE, style)

    def all_ranks_step(self, prefix: tuple[str, ...] = ()) -> list[Step]:
        """The plain plan: one srun step whose tasks are every rank (workers, then servers), each running
        `prefix + command`; ranks read SLURM_* (or what the `prefix` shim sets)."""
        hosts = self.workers + self.servers
        argv = [*self.srun(hosts, self.cpus, self.name, self.out), *prefix, *self.command]
        return [Step("workers", tuple(argv), tuple(hosts), self.common_env())]
