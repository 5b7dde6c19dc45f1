"""Backend `byteps`: BytePS's push-pull through its own parameter servers. transport.py is what the
ranks run, roles.py the three roles and their layout, launch.py how launchers start them. BytePS cannot
be installed on a CPU-only machine: `available()` says so in one line."""

from harness.backends.byteps import launch
from harness.backends.byteps.roles import byteps_role_env, slurm_layout
from harness.backends.byteps.transport import BytePSTransport, available, versions
from harness.contracts.backend import BackendEntry, BackendLaunch
from harness.contracts.recipes.sbatch import SbatchRecipe
from harness.contracts.recipes.srun import SrunRecipe

__all__ = ["byteps_role_env", "slurm_layout"]

ENTRY = BackendEntry(
    name="byteps",
    description="BytePS push-pull with its own servers (needs CUDA+NCCL: not runnable on CPU-only machines)",
    provides=frozenset({"byteps_engine"}),
    library="byteps",
    start=lambda cell, env, device: BytePSTransport(cell, env, device),
    available=available,
    versions=versions,
    launch=BackendLaunch(
        recipes=(
            SrunRecipe(plan=launch.srun_plan, task_envs={"byteps": launch.byteps_task_env}),
            SbatchRecipe(styles=launch.SBATCH_STYLES, examples=launch.SBATCH_EXAMPLES, sweeps=launch.SBATCH_SWEEPS),
        )
    ),
)
"""What harness.backends.load() registers for this backend."""
