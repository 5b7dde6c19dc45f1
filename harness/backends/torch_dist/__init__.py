"""Backend `torch`: torch.distributed (gloo on CPU, nccl on GPU) and a parameter server over gloo
point-to-point. transport.py is what the ranks run, ps.py the server, launch.py how launchers start it."""

from harness.backends.torch_dist.launch import (
    SBATCH_EXAMPLES,
    SBATCH_STYLES,
    SBATCH_SWEEPS,
    torch_task_env,
)
from harness.backends.torch_dist.transport import (
    TorchTransport,
    init_process_group,
    serve,
    start,
    versions,
)
from harness.contracts.backend import BackendEntry, BackendLaunch
from harness.contracts.recipes.sbatch import SbatchRecipe
from harness.contracts.recipes.srun import SrunRecipe

__all__ = ["TorchTransport", "init_process_group", "serve", "start", "versions"]

ENTRY = BackendEntry(
    name="torch",
    description="torch.distributed: gloo on CPU, nccl on GPU; parameter servers over gloo point-to-point",
    provides=frozenset({"allreduce", "push_pull", "reduce_scatter", "all_gather", "process_group"}),
    start=start,
    serve=serve,
    versions=versions,
    launch=BackendLaunch(
        recipes=(
            SrunRecipe(task_envs={"torch": torch_task_env}),
            SbatchRecipe(styles=SBATCH_STYLES, examples=SBATCH_EXAMPLES, sweeps=SBATCH_SWEEPS),
        )
    ),
)
"""What harness.backends.load() registers for this backend."""
