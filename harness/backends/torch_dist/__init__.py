"""Backend `torch`: torch.distributed (gloo on CPU, nccl on GPU) and a parameter server over gloo
point-to-point. transport.py is what the ranks run, ps.py the server, launch.py how launchers start it."""

from harness.backends.base import BackendEntry, register
from harness.launch.recipes import BackendLaunch, SbatchRecipe, SrunRecipe
from harness.backends.torch_dist.launch import (
    SBATCH_EXAMPLES,
    SBATCH_STYLES,
    torch_task_env,
)
from harness.backends.torch_dist.transport import (
    TorchTransport,
    init_process_group,
    serve,
    start,
    versions,
)

__all__ = ["TorchTransport", "init_process_group", "serve", "start", "versions"]

register(BackendEntry(
    name="torch",
    description="torch.distributed: gloo on CPU, nccl on GPU; parameter servers over gloo point-to-point",
    start=start, serve=serve, versions=versions,
    launch=BackendLaunch(recipes=(SrunRecipe(task_envs={"torch": torch_task_env}),
                                  SbatchRecipe(styles=SBATCH_STYLES, examples=SBATCH_EXAMPLES))),
))
