"""How the `torch` backend is started by each launcher (docs/ARCHITECTURE.md, "Backend").

- one box: ddlbench's spawner (harness/spawner/cell.py), one process per rank;
- srun: one task per rank (workers, then servers) reading SLURM_* (harness/launchers/srun/env.py);
  the plain plan (`SrunContext.all_ranks_step`);
- a shim style `torch` that gives a task torchrun's variables (RANK, WORLD_SIZE, LOCAL_RANK, ...),
  for code that reads only those (deepspeed.init_distributed does);
- batch scripts: the `srun` launch style, its example script and the sweep file it runs.
"""

from __future__ import annotations

from collections.abc import Mapping

from harness.contracts.recipes.sbatch import REFERENCE_COMMAND, SbatchStyle
from harness.launchers.identity import from_slurm
from harness.procs.argv import argv_words, step_cpus


def torch_task_env(environ: Mapping[str, str]) -> dict[str, str | None]:
    """torchrun's variables for one srun task, from its SLURM_* (deepspeed.init_distributed and
    torchrun-style code read these)."""
    e = from_slurm(environ)
    return {
        "RANK": str(e.rank),
        "WORLD_SIZE": str(e.world_size),
        "LOCAL_RANK": str(e.local_rank),
        "LOCAL_WORLD_SIZE": str(e.local_world_size),
        "NODE_RANK": str(e.node_rank),
        "MASTER_ADDR": e.master_addr,
        "MASTER_PORT": str(e.master_port),
        "DDLBENCH_LAUNCHER": "slurm",
    }


def sbatch_srun(spec) -> str:
    return (
        "# One task per worker; each reads its rank from SLURM_* (harness.launchers.srun.env).\n"
        "# --kill-on-bad-exit: one failed rank ends the step instead of leaving the others hung.\n"
        f"srun --kill-on-bad-exit=1 {step_cpus(spec.cpus_per_task)} {argv_words(spec.command)}\n"
    )


SBATCH_STYLES = {
    "srun": SbatchStyle(
        sbatch_srun,
        reference=dict(
            job_name="ddl-srun",
            command=REFERENCE_COMMAND,
            nodes=2,
            tasks_per_node=1,
            cpus_per_task=2,
            partition="cpu",
            time_limit_min=30,
            output="logs/%x-%A_%a.out",
            array="0-3%2",
            extra_sbatch=("--exclusive",),
            env={"GLOO_SOCKET_IFNAME": "eth0", "OMP_NUM_THREADS": "1"},
        ),
    )
}

SBATCH_EXAMPLES = (
    {
        "name": "torch-srun",
        "sweep": "torch",
        "nodes": 2,
        "notes": [
            "torch.distributed (nccl on GPU, gloo on CPU): each cell is one srun step, one task per GPU;",
            "every task reads its rank from SLURM_PROCID/SLURM_LOCALID (harness/launchers/srun/env.py).",
        ],
    },
)

SBATCH_SWEEPS = {
    "torch": {
        "notes": [
            "Several GPU nodes (slurm/multi-node.sbatch, slurm/torch-srun.sbatch): the same methods on",
            "torch.distributed, 1 to 8 workers; 8 workers span 2 nodes of 4 GPUs. Parameter servers go on nodes",
            "the workers leave free, else beside them.",
        ],
        "sweep": {
            "name": "torch",
            "workloads": ["resnet50", "bert-base", "bert-large"],
            "schemes": [
                "ddp",
                "bsp-a2a",
                "wfbp-a2a",
                "mgwfbp",
                "bytescheduler-a2a",
                "bsp-ps",
                "wfbp-ps",
                "bytescheduler-ps",
            ],
            "backends": ["torch"],
            "workers": [1, 2, 4, 8],
            "servers": [2],
            "device": "cuda",
            "warmup": 10,
            "iters": 30,
            "timeout_s": 900,
        },
    },
}
