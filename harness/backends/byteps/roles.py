"""BytePS's roles and where they run (docs/ARCHITECTURE.md, "Backend"): one scheduler, S servers and the
workers, told apart by DMLC_* variables. The one place their variables and layout are written; the srun
plan and the batch-script block (launch.py) build on these.

`byteps_role_env` builds a role's variables; `slurm_layout` places every process in an allocation: the
scheduler on node 0, servers on nodes of their own when asked (else colocated with the workers), workers
one per GPU.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from harness.core.errors import UserError

ROLES = ("scheduler", "server", "worker")


def byteps_role_env(
    role: str,
    num_workers: int,
    num_servers: int,
    scheduler_host: str,
    scheduler_port: int,
    worker_id: int = 0,
    local_rank: int = 0,
    local_size: int = 1,
) -> dict:
    """Environment of one BytePS process. Workers here are BytePS *worker machines* (DMLC_NUM_WORKER
    counts machines; each runs local_size GPU processes, told apart by BYTEPS_LOCAL_RANK)."""
    if role not in ROLES:
        raise UserError(f"unknown BytePS role {role!r}: one of {', '.join(ROLES)}")
    if num_workers < 1 or num_servers < 1:
        raise UserError(f"BytePS needs >= 1 worker and >= 1 server, got {num_workers} and {num_servers}")
    if role == "worker" and not 0 <= worker_id < num_workers:
        raise UserError(f"worker_id {worker_id} out of range for {num_workers} workers")
    env = {
        "DMLC_ROLE": role,
        "DMLC_NUM_WORKER": str(num_workers),
        "DMLC_NUM_SERVER": str(num_servers),
        "DMLC_PS_ROOT_URI": scheduler_host,
        "DMLC_PS_ROOT_PORT": str(scheduler_port),
    }
    if role == "worker":
        env.update(DMLC_WORKER_ID=str(worker_id), BYTEPS_LOCAL_RANK=str(local_rank), BYTEPS_LOCAL_SIZE=str(local_size))
    if role == "server":
        env["BYTEPS_SERVER_ENABLE_SCHEDULE"] = "1"  # BytePS's own server-side scheduling
    return env


@dataclass(frozen=True)
class Proc:
    node: int
    role: str
    env: dict


def slurm_layout(
    nodes: list[str], workers_per_node: int, num_servers: int, *, server_nodes: int = 0, port: int = 1234
) -> list[Proc]:
    """Every process of a BytePS job in a Slurm allocation (`nodes` = its host names, in order).

    The scheduler runs on node 0. With server_nodes > 0 the last `server_nodes` nodes hold only servers
    (spread round-robin); the others are worker machines. With server_nodes = 0 servers are colocated with
    the workers, round-robin over the worker machines."""
    if server_nodes >= len(nodes):
        raise UserError(f"{server_nodes} server node(s) leave no worker node in an allocation of {len(nodes)}")
    worker_nodes = list(range(len(nodes) - server_nodes))
    hosts = list(range(len(worker_nodes), len(nodes))) if server_nodes else worker_nodes
    n_workers = len(worker_nodes)
    mk = functools.partial(
        byteps_role_env, num_workers=n_workers, num_servers=num_servers, scheduler_host=nodes[0], scheduler_port=port
    )
    procs = [Proc(0, "scheduler", mk("scheduler"))]
    procs += [Proc(hosts[s % len(hosts)], "server", mk("server")) for s in range(num_servers)]
    for wid, node in enumerate(worker_nodes):
        procs += [
            Proc(node, "worker", mk("worker", worker_id=wid, local_rank=lr, local_size=workers_per_node))
            for lr in range(workers_per_node)
        ]
    return procs


def shared_env(
    num_worker_machines: int | str, num_servers: int | str, scheduler_host: str, scheduler_port: int | str
) -> dict:
    """The variables every process of a BytePS job shares (values may be shell expressions in scripts)."""
    return {
        "DMLC_NUM_WORKER": str(num_worker_machines),
        "DMLC_NUM_SERVER": str(num_servers),
        "DMLC_PS_ROOT_URI": str(scheduler_host),
        "DMLC_PS_ROOT_PORT": str(scheduler_port),
    }
