"""Who a process is in its job: the facts every launcher gives a rank (docs/ARCHITECTURE.md, "Launching").

A plain record, imported by the readers of each launcher's variables (harness/launchers/identity.py,
harness/launchers/srun/env.py) and by the backends.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class RankIdentity:
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
