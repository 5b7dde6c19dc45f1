"""Who this node is in a multi-node job started without Slurm, and where each rank of a cell runs: pure
functions over the scheduler's variables (docs/ARCHITECTURE.md, "Launching"; the launcher is
harness/launchers/nodes/launcher.py).

Read, in this order (a flag of `ddlbench sweep` wins over every variable):
- Kubeflow's PyTorchJob and Trainer (torchrun's own variables, prefixed): PET_NNODES (a count, or
  "min:max" for an elastic job: the maximum is used), PET_NPROC_PER_NODE, PET_NODE_RANK, PET_MASTER_ADDR,
  PET_MASTER_PORT; an elastic job's PET_RDZV_ENDPOINT (host:port) stands in for the master address;
- JobSet: JOB_COMPLETION_INDEX is the node rank where PET_NODE_RANK is absent;
- SkyPilot: SKYPILOT_NODE_IPS (one address a line, the head first), SKYPILOT_NODE_RANK,
  SKYPILOT_NUM_NODES, SKYPILOT_NUM_GPUS_PER_NODE (0 on CPU nodes: one rank per node);
- a plain node list: --nnodes, --node-rank, --master-addr, --master-port, --nproc-per-node, as
  `torchrun --nnodes` takes them.
The job secret (--secret-file, else DDLBENCH_JOB_SECRET) is read apart: harness/launchers/nodes/secret.py.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from harness.contracts.cell import CellSpec, server_placement
from harness.core.errors import UserError

DEFAULT_PORT = 29400
"""The rendezvous port when the scheduler names none (torchrun's c10d default)."""
FLAG_NAMES = {
    "nnodes": "--nnodes",
    "node_rank": "--node-rank",
    "nproc_per_node": "--nproc-per-node",
    "master_addr": "--master-addr",
    "master_port": "--master-port",
}


@dataclass(frozen=True)
class NodeJob:
    nnodes: int
    """Nodes in the job, each running `ddlbench sweep` once."""
    node_rank: int
    """This node's index; node 0 hosts the store and leads."""
    nproc_per_node: int
    """Worker ranks a node runs at most (one per GPU; on CPU nodes one per node unless told)."""
    master_addr: str
    """Address of node 0, where the c10d store listens."""
    master_port: int
    """The store's TCP port."""
    source: str
    """Whose variables these were: kubeflow | jobset | skypilot | flags."""


def _int(value, what: str, low: int = 0) -> int:
    try:
        n = int(str(value).strip())
    except ValueError:
        raise UserError(f"{what} must be an integer, got {value!r}; fix the scheduler's variable or the flag") from None
    if n < low:
        raise UserError(f"{what} must be >= {low}, got {n}; fix the scheduler's variable or the flag")
    return n


def _nproc(value, what: str) -> int:
    """PET_NPROC_PER_NODE may say auto/gpu/cpu (torchrun's words): one rank per GPU, else one."""
    if str(value).strip() in ("auto", "gpu", "cpu"):
        return 0  # decided by the node's devices (launcher.py)
    return _int(value, what, 1)


def from_scheduler(env: Mapping[str, str]) -> dict:  # noqa: C901 - one `if` per scheduler variable read
    """The fields the scheduler's variables give (an empty dict when none of them is set). Pure."""
    got: dict = {}
    if "SKYPILOT_NODE_RANK" in env or "SKYPILOT_NUM_NODES" in env:
        ips = [line.strip() for line in env.get("SKYPILOT_NODE_IPS", "").splitlines() if line.strip()]
        got.update(
            source="skypilot",
            nnodes=_int(env.get("SKYPILOT_NUM_NODES", len(ips)), "SKYPILOT_NUM_NODES", 1),
            node_rank=_int(env.get("SKYPILOT_NODE_RANK", 0), "SKYPILOT_NODE_RANK"),
        )
        if ips:
            got["master_addr"] = ips[0]
        gpus = _int(env.get("SKYPILOT_NUM_GPUS_PER_NODE", 0), "SKYPILOT_NUM_GPUS_PER_NODE")
        got["nproc_per_node"] = gpus or 1
    if any(k.startswith("PET_") for k in env) or "JOB_COMPLETION_INDEX" in env:
        got["source"] = "kubeflow" if "PET_NODE_RANK" in env or "PET_NNODES" in env else "jobset"
        if "PET_NNODES" in env:
            nn = str(env["PET_NNODES"])
            got["nnodes"] = _int(nn.split(":")[-1], "PET_NNODES", 1)  # elastic min:max -> max
        if "PET_NODE_RANK" in env:
            got["node_rank"] = _int(env["PET_NODE_RANK"], "PET_NODE_RANK")
        elif "JOB_COMPLETION_INDEX" in env:
            got["node_rank"] = _int(env["JOB_COMPLETION_INDEX"], "JOB_COMPLETION_INDEX")
        if "PET_NPROC_PER_NODE" in env:
            got["nproc_per_node"] = _nproc(env["PET_NPROC_PER_NODE"], "PET_NPROC_PER_NODE")
        if env.get("PET_MASTER_ADDR"):
            got["master_addr"] = env["PET_MASTER_ADDR"]
        elif env.get("PET_RDZV_ENDPOINT"):
            host, _, port = env["PET_RDZV_ENDPOINT"].rpartition(":")
            got["master_addr"] = host or port
            if host and port:
                got["master_port"] = _int(port, "PET_RDZV_ENDPOINT's port", 1)
        if env.get("PET_MASTER_PORT"):
            got["master_port"] = _int(env["PET_MASTER_PORT"], "PET_MASTER_PORT", 1)
    return got


def node_job(env: Mapping[str, str], flags: dict | None = None) -> NodeJob | None:
    """This node's job from the scheduler's variables and the flags (flags win); None when neither says
    there is more than one node. UserError for what is missing or inconsistent. Pure."""
    got = from_scheduler(env)
    given = {k: v for k, v in (flags or {}).items() if v is not None}
    if given:
        got.update(given)
        got["source"] = got.get("source", "flags") if len(given) < len(FLAG_NAMES) else "flags"
    if got.get("nnodes", 1) <= 1 and not given:
        return None
    where = got.get("source", "flags")
    for key in ("nnodes", "node_rank", "master_addr"):
        if key not in got:
            raise UserError(
                f"a multi-node sweep ({where}) needs {FLAG_NAMES[key]} (or the scheduler's variable for "
                f"it); every node runs the same `ddlbench sweep` with its own node rank"
            )
    job = NodeJob(
        nnodes=_int(got["nnodes"], "the node count", 1),
        node_rank=_int(got["node_rank"], "the node rank"),
        nproc_per_node=int(got.get("nproc_per_node", 1)),
        master_addr=str(got["master_addr"]),
        master_port=_int(got.get("master_port", DEFAULT_PORT), "the master port", 1),
        source=where,
    )
    if job.node_rank >= job.nnodes:
        raise UserError(
            f"node rank {job.node_rank} is not below the node count {job.nnodes}; fix "
            f"--node-rank/--nnodes or the scheduler's variables"
        )
    return job


def cell_nodes(workers: int, nnodes: int, per_node: int) -> int:
    """Nodes a cell of `workers` spans: workers fill nodes `per_node` at a time. UserError if they cannot."""
    need = -(-workers // per_node)
    if need > nnodes:
        raise UserError(
            f"{workers} workers need {need} nodes at {per_node} per node, and the job has {nnodes}; "
            f"lower `workers:` or add nodes"
        )
    return need


def rank_nodes(cell: CellSpec, nnodes: int, per_node: int) -> tuple[list[int], str]:
    """The node of every rank of `cell` (workers, then servers) and where its servers went (dedicated,
    colocated or ""): workers fill the first nodes `per_node` at a time; servers go to the nodes no worker
    uses when `server_hosts` allows (dedicated, auto), else beside the workers. Pure."""
    used = cell_nodes(cell.workers, nnodes, per_node)
    nodes = [w // per_node for w in range(cell.workers)]
    where = server_placement(cell, nnodes - used, where=f"this {nnodes}-node job")
    spare = list(range(used, nnodes)) if where == "dedicated" else list(range(used))
    nodes += [spare[j % len(spare)] for j in range(cell.servers)]
    return nodes, where
