"""Backend `byteps`: BytePS's push-pull through its own parameter servers, written against BytePS's
documented API (byteps.torch as bps: init, push_pull_async_inplace, synchronize, broadcast_parameters).

BytePS cannot be installed on a CPU-only machine (its build needs CUDA and NCCL, and its last release
does not build against current torch): `available()` says so and `ddlbench run --backend byteps` stops
with that one line and exit status 2; it never falls back to another backend.

A BytePS job has three roles, told apart by DMLC_* variables: one scheduler, S servers, W workers.
`byteps_role_env` builds them; `slurm_layout` places them in a Slurm allocation: the scheduler on node 0,
servers on nodes of their own when asked (else colocated with the workers), workers one per GPU.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import torch

from harness.backends.base import BACKENDS, BackendEntry, Handle, Transport
from harness.errors import UserError

ROLES = ("scheduler", "server", "worker")
WHY = ("backend byteps is not available here: BytePS is not installed and cannot be on this machine "
       "(its build needs CUDA and NCCL and does not support current torch); use the -ps schemes on "
       "backend torch for parameter-server results")


def byteps_role_env(role: str, num_workers: int, num_servers: int, scheduler_host: str,
                    scheduler_port: int, worker_id: int = 0, local_rank: int = 0, local_size: int = 1) -> dict:
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
        env.update(DMLC_WORKER_ID=str(worker_id), BYTEPS_LOCAL_RANK=str(local_rank),
                   BYTEPS_LOCAL_SIZE=str(local_size))
    if role == "server":
        env["BYTEPS_SERVER_ENABLE_SCHEDULE"] = "1"  # BytePS's own server-side scheduling
    return env


@dataclass(frozen=True)
class Proc:
    node: int
    role: str
    env: dict


def slurm_layout(nodes: list[str], workers_per_node: int, num_servers: int, *, server_nodes: int = 0,
                 port: int = 1234) -> list[Proc]:
    """Every process of a BytePS job in a Slurm allocation (`nodes` = its host names, in order).

    The scheduler runs on node 0. With server_nodes > 0 the last `server_nodes` nodes hold only servers
    (spread round-robin); the others are worker machines. With server_nodes = 0 servers are colocated with
    the workers, round-robin over the worker machines."""
    if server_nodes >= len(nodes):
        raise UserError(f"{server_nodes} server node(s) leave no worker node in an allocation of {len(nodes)}")
    worker_nodes = list(range(len(nodes) - server_nodes))
    hosts = list(range(len(worker_nodes), len(nodes))) if server_nodes else worker_nodes
    n_workers = len(worker_nodes)
    mk = functools.partial(byteps_role_env, num_workers=n_workers, num_servers=num_servers,
                           scheduler_host=nodes[0], scheduler_port=port)
    procs = [Proc(0, "scheduler", mk("scheduler"))]
    procs += [Proc(hosts[s % len(hosts)], "server", mk("server")) for s in range(num_servers)]
    for wid, node in enumerate(worker_nodes):
        procs += [Proc(node, "worker", mk("worker", worker_id=wid, local_rank=lr, local_size=workers_per_node))
                  for lr in range(workers_per_node)]
    return procs


class _BpsHandle(Handle):
    def __init__(self, bps, handle):
        self.bps, self.handle = bps, handle

    def wait(self) -> None:
        if self.handle is not None:
            self.bps.synchronize(self.handle)
            self.handle = None


class BytePSTransport(Transport):
    """push-pull is BytePS's primitive: sums through its servers (average=False)."""

    def __init__(self, cell, env, device):
        import byteps.torch as bps

        self.bps = bps
        bps.init()
        self.rank, self.workers, self.device = bps.rank(), bps.size(), device
        self._n = 0

    @property
    def servers(self) -> int:
        import os

        return int(os.environ.get("DMLC_NUM_SERVER", "0"))

    def declare_keys(self, keys):
        return {name: 0 for name, _ in keys}  # BytePS assigns keys to servers itself

    def push_pull_async(self, tensor, name, priority=0) -> Handle:
        return _BpsHandle(self.bps, self.bps.push_pull_async_inplace(tensor, average=False, name=name,
                                                                     priority=-priority))

    allreduce_async = push_pull_async  # BytePS's only collective; the sum is the same

    def barrier(self) -> None:
        self.allreduce_async(torch.zeros(1), "ddlbench.barrier").wait()

    def broadcast_object(self, obj: Any, src: int = 0) -> Any:
        self._n += 1
        return self.bps.broadcast_object(obj, root_rank=src, name=f"ddlbench.bcast.{self._n}")

    def gather_object(self, obj: Any, dst: int = 0):
        raise UserError("backend byteps cannot gather objects (BytePS has no allgather)")

    def allreduce_min_(self, tensor) -> None:
        raise UserError("backend byteps has no min-reduction (push-pull only sums)")

    def shutdown(self) -> None:
        self.bps.shutdown()


@functools.lru_cache(maxsize=1)
def _available() -> str | None:
    try:
        import byteps.torch  # noqa: F401
    except Exception:
        return WHY
    return None


def _versions() -> dict:
    import byteps

    return {"byteps": getattr(byteps, "__version__", "?"), "torch": torch.__version__}


BACKENDS.register("byteps", BackendEntry(
    name="byteps",
    description="BytePS push-pull with its own servers (needs CUDA+NCCL: not runnable on CPU-only machines)",
    start=lambda cell, env, device: BytePSTransport(cell, env, device),
    available=_available, versions=_versions,
))


# ------------------------------------------------------------------ the native scheme: BytePS's own optimizer
from harness.schemes.base import Scheme, register  # noqa: E402


class BytePSNative(Scheme):
    """bps.DistributedOptimizer: gradients pushed/pulled during backward, BytePS's own partitioning and
    priority scheduling; parameters broadcast from rank 0 first."""

    def setup(self, model):
        import byteps.torch as bps

        model = super().setup(model)
        bps.broadcast_parameters(model.state_dict(), root_rank=0)
        named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
        self.optimizer = bps.DistributedOptimizer(self.optimizer, named_parameters=named)
        bps.broadcast_optimizer_state(self.optimizer, root_rank=0)
        return model

    def wait(self) -> None:
        self.optimizer.synchronize()

    def step(self) -> None:
        with self.optimizer.skip_synchronize():
            self.optimizer.step()
        self.optimizer.zero_grad()


register("byteps", BytePSNative, "BytePS DistributedOptimizer: push-pull via its servers, its own scheduling",
         backends=("byteps",))
