"""How the `deepspeed` backend is started by each launcher (docs/ARCHITECTURE.md, "Backend"):

- one box: the `deepspeed` launcher, as DeepSpeed users start a job
  (`deepspeed --num_gpus W --master_port P --no_local_rank --module harness.rank.worker --cell ... --out ...`;
  on a CPU box --num_gpus is the number of local processes). It sets RANK/WORLD_SIZE/LOCAL_RANK/MASTER_*
  for every rank, which harness/launchers/identity.py reads, and deepspeed.init_distributed joins them.
  --no_local_rank: the worker takes its rank from the environment, not from --local_rank;
- srun: one task per rank given the torch variables deepspeed.init_distributed reads (the `torch` shim);
- batch scripts: the `deepspeed` launch style.
Every launcher passes TORCH_EXTENSIONS_DIR, where the installer compiled DeepSpeed's ops (else each rank
compiles them again).
"""

from __future__ import annotations

from harness.backends.deepspeed.transport import extensions_dir
from harness.contracts.recipes.sbatch import REFERENCE_COMMAND, SbatchStyle
from harness.contracts.recipes.srun import SrunContext, Step
from harness.procs.argv import argv_words, launcher_exe, step_cpus, worker_argv
from harness.procs.env import base_env
from harness.procs.framework import prepare_cell_dir, run_supervised
from harness.procs.ports import free_port

NODES_REFUSAL = (
    "backend deepspeed starts its ranks with its own launch program (deepspeed), which the multi-node "
    "launcher does not drive; run its cells under Slurm (`--launcher srun`) or on one box"
)
"""Why `ddlbench sweep` run on every node cannot start DeepSpeed's ranks (harness/launchers/nodes/launcher.py)."""


def launch_env(cell) -> dict:
    # DS_ACCELERATOR from the cell's device type: DeepSpeed's own detection warns on every CPU import
    return {"TORCH_EXTENSIONS_DIR": extensions_dir(), "DS_ACCELERATOR": "cuda" if cell.device == "cuda" else "cpu"}


def launch_local(cell, cell_dir, placement=None):
    """Run the cell through the deepspeed launch program on this box; returns rank 0's result.json."""
    cell_dir = prepare_cell_dir(cell, cell_dir, placement)
    argv = [
        launcher_exe("deepspeed"),
        "--num_gpus",
        str(cell.workers),
        "--master_port",
        str(free_port()),
        "--master_addr",
        "127.0.0.1",
        "--no_local_rank",
        "--module",
        *worker_argv(cell_dir)[1:],
    ]
    # gloo on the cell's network (loopback on one box), whatever the hostname resolves to
    env = base_env(cell.threads, "deepspeed", {**launch_env(cell), **cell.network_vars(1)})
    return run_supervised(argv, env, cell.timeout_s, cell_dir, "deepspeed launch program")


def srun_plan(ctx: SrunContext) -> list[Step]:
    return ctx.all_ranks_step((*ctx.shim("torch"), "--"))


def sbatch_deepspeed(spec) -> str:
    return (
        "# One task per worker with the torch variables deepspeed.init_distributed reads.\n"
        "export DDLBENCH_LAUNCHER=slurm\n"
        f"srun --kill-on-bad-exit=1 {step_cpus(spec.cpus_per_task)} bash -c '\n"
        "  export RANK=$SLURM_PROCID WORLD_SIZE=$SLURM_NTASKS\n"
        "  export LOCAL_RANK=$SLURM_LOCALID LOCAL_WORLD_SIZE=$SLURM_NTASKS_PER_NODE\n"
        "  export NODE_RANK=$SLURM_NODEID\n"
        '  exec "$@"\' ddlbench-task ' + argv_words(spec.command) + "\n"
    )


SBATCH_STYLES = {
    "deepspeed": SbatchStyle(
        sbatch_deepspeed,
        reference=dict(
            job_name="ddl-deepspeed",
            command=(*REFERENCE_COMMAND, "--backend", "deepspeed"),
            nodes=2,
            tasks_per_node=4,
            gpus_per_node=4,
            cpus_per_task=8,
            partition="gpu",
            master_port=29500,
            launch="deepspeed",
            env={"NCCL_SOCKET_IFNAME": "ib0"},
        ),
    )
}

SBATCH_EXAMPLES = (
    {
        "name": "deepspeed",
        "sweep": "deepspeed",
        "nodes": 2,
        "notes": [
            "DeepSpeed: each cell is one srun step, one task per GPU, each given the variables",
            "deepspeed.init_distributed reads (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT).",
        ],
    },
)

SBATCH_SWEEPS = {
    "deepspeed": {
        "notes": [
            "DeepSpeed (slurm/deepspeed.sbatch): the DeepSpeed engine without ZeRO and with ZeRO stages 1-3.",
            "Needs the `deepspeed` backend to be usable on the nodes (`ddlbench list`).",
        ],
        "sweep": {
            "name": "deepspeed",
            "workloads": ["resnet50", "bert-base"],
            "schemes": ["zero0", "zero1", "zero2", "zero3"],
            "backends": ["deepspeed"],
            "workers": [1, 2, 4, 8],
            "device": "cuda",
            "warmup": 10,
            "iters": 30,
            "timeout_s": 900,
        },
    },
}
