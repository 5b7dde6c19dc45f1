"""Backend `torch`: torch.distributed (gloo on CPU, nccl on GPU) and a parameter server over gloo
point-to-point. transport.py is what the ranks run, ps.py the server, launch.py how launchers start it."""

from harness.backends.base import BACKENDS, BackendEntry
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

BACKENDS.register("torch", BackendEntry(
    name="torch",
    description="torch.distributed: gloo on CPU, nccl on GPU; parameter servers over gloo point-to-point",
    start=start, serve=serve, versions=versions,
    task_envs={"torch": torch_task_env},
    sbatch_styles=SBATCH_STYLES, sbatch_examples=SBATCH_EXAMPLES,
))
