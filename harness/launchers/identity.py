"""Where a worker learns who it is: its rank, the world, and the rendezvous address.

Sources, checked in order: the variables our own local launcher, torchrun and the deepspeed launch program set
(RANK/WORLD_SIZE/LOCAL_RANK/MASTER_ADDR/MASTER_PORT), a framework launcher's own (each backend reads
its launcher's: `BackendLaunch.identity`, asked through harness/contracts/backend.py), Open MPI's mpirun
(OMPI_COMM_WORLD_*), then Slurm's
(SLURM_PROCID, SLURM_NTASKS, ..., see harness.launchers.srun.env), else a single process.

`from_slurm` is who a task is by Slurm's variables alone, whatever else its environment holds: what the
backends' srun shim styles (`SrunRecipe.task_envs`, harness/contracts/recipes/srun.py) turn into their
framework's variables. The layers above read a launcher's variables here, never in its folder
(docs/ARCHITECTURE.md, "Rules" 6).
"""

from __future__ import annotations

import os

from harness.contracts import backend
from harness.contracts.identity import RankIdentity
from harness.launchers.srun.env import from_slurm

__all__ = ["RankIdentity", "from_environ", "from_slurm"]


def from_environ(environ: dict | None = None) -> RankIdentity:
    env = os.environ if environ is None else environ
    if "RANK" in env and "WORLD_SIZE" in env:
        world = int(env["WORLD_SIZE"])
        local_world = int(env.get("LOCAL_WORLD_SIZE", world))
        return RankIdentity(
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
    found = backend.identity(env)  # a framework's own launch program (horovodrun) names them its way
    if found is not None:
        return found
    if "OMPI_COMM_WORLD_RANK" in env and "OMPI_COMM_WORLD_SIZE" in env:  # Open MPI's mpirun
        world = int(env["OMPI_COMM_WORLD_SIZE"])
        local_world = int(env.get("OMPI_COMM_WORLD_LOCAL_SIZE", world))
        return RankIdentity(
            rank=int(env["OMPI_COMM_WORLD_RANK"]),
            world_size=world,
            local_rank=int(env.get("OMPI_COMM_WORLD_LOCAL_RANK", env["OMPI_COMM_WORLD_RANK"])),
            local_world_size=local_world,
            master_addr=env.get("MASTER_ADDR", "127.0.0.1"),
            master_port=int(env.get("MASTER_PORT", "29500")),
            node_rank=int(env.get("OMPI_COMM_WORLD_NODE_RANK", "0")),
            nodes=max(1, world // max(1, local_world)),
            source="mpirun",
        )
    if "SLURM_PROCID" in env and "SLURM_NTASKS" in env:
        return from_slurm(env)
    return RankIdentity(
        rank=0, world_size=1, local_rank=0, local_world_size=1, master_addr="127.0.0.1", master_port=29500
    )
