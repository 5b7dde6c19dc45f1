"""Where a worker learns who it is: its rank, the world, and the rendezvous address.

Sources, checked in order: the variables our own local launcher, torchrun and the deepspeed launcher set
(RANK/WORLD_SIZE/LOCAL_RANK/MASTER_ADDR/MASTER_PORT), horovodrun's (HOROVOD_RANK/HOROVOD_SIZE/...) and
mpirun's (OMPI_COMM_WORLD_*), then Slurm's (SLURM_PROCID, SLURM_NTASKS, ...,
see harness.launch.slurm_env), else a single process.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field


@dataclass(frozen=True)
class DistEnv:
    rank: int
    """Global rank of this process (workers first, then parameter servers)."""
    world_size: int
    """Number of processes in the job (workers + servers)."""
    local_rank: int
    """Rank among the processes on this node; selects the GPU."""
    local_world_size: int
    """Processes on this node."""
    master_addr: str
    """Rendezvous host (rank 0's node)."""
    master_port: int
    """Rendezvous TCP port."""
    node_rank: int = 0
    """Index of this node in the job's node list."""
    nodes: int = 1
    """Number of nodes in the job."""
    source: str = "single"
    """Which launcher set the variables: local | torchrun | deepspeed | horovodrun | mpirun | slurm | single."""
    extra: dict = field(default_factory=dict)
    """Launcher facts recorded in the environment table (e.g. slurm_job_id, slurm_nodelist)."""


def from_environ(environ: dict | None = None) -> DistEnv:
    env = os.environ if environ is None else environ
    if "RANK" in env and "WORLD_SIZE" in env:
        world = int(env["WORLD_SIZE"])
        local_world = int(env.get("LOCAL_WORLD_SIZE", world))
        return DistEnv(
            rank=int(env["RANK"]),
            world_size=world,
            local_rank=int(env.get("LOCAL_RANK", env["RANK"])),
            local_world_size=local_world,
            master_addr=env.get("MASTER_ADDR", "127.0.0.1"),
            master_port=int(env.get("MASTER_PORT", "29500")),
            node_rank=int(env.get("GROUP_RANK", env.get("NODE_RANK", "0"))),
            # torchrun and ddlbench's launchers say how many hosts take part (3 workers on 2 hosts, or a
            # parameter server beside the workers, defeat world // local_world)
            nodes=int(env.get("GROUP_WORLD_SIZE", 0)) or max(1, world // max(1, local_world)),
            source="torchrun" if "TORCHELASTIC_RUN_ID" in env else env.get("DDLBENCH_LAUNCHER", "local"),
        )
    for pre, src in (("HOROVOD_", "horovodrun"), ("OMPI_COMM_WORLD_", "mpirun")):
        # horovodrun (gloo) and Open MPI's mpirun name the same facts their own way
        if f"{pre}RANK" in env and f"{pre}SIZE" in env:
            world = int(env[f"{pre}SIZE"])
            local_world = int(env.get(f"{pre}LOCAL_SIZE", world))
            return DistEnv(
                rank=int(env[f"{pre}RANK"]),
                world_size=world,
                local_rank=int(env.get(f"{pre}LOCAL_RANK", env[f"{pre}RANK"])),
                local_world_size=local_world,
                master_addr=env.get("HOROVOD_GLOO_RENDEZVOUS_ADDR", env.get("MASTER_ADDR", "127.0.0.1")),
                master_port=int(env.get("MASTER_PORT", "29500")),
                node_rank=int(env.get("HOROVOD_CROSS_RANK", env.get("OMPI_COMM_WORLD_NODE_RANK", "0"))),
                nodes=int(env.get("HOROVOD_CROSS_SIZE", max(1, world // max(1, local_world)))),
                source=src,
            )
    if "SLURM_PROCID" in env and "SLURM_NTASKS" in env:
        from harness.launch.slurm_env import from_slurm

        return from_slurm(env)
    return DistEnv(rank=0, world_size=1, local_rank=0, local_world_size=1,
                   master_addr="127.0.0.1", master_port=29500)
