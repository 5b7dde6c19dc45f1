"""Backend `deepspeed`: the ZeRO schemes (zero0..zero3) run inside a DeepSpeed engine. transport.py is
what the ranks run, launch.py how launchers start it (the `deepspeed` launcher on one box)."""

from harness.backends.base import BackendEntry, register
from harness.backends.deepspeed.launch import (
    SBATCH_EXAMPLES,
    SBATCH_STYLES,
    NODES_REFUSAL,
    launch_env,
    launch_local,
    srun_plan,
)
from harness.launch.recipes import BackendLaunch, LocalRecipe, NodesRecipe, SbatchRecipe, SrunRecipe
from harness.backends.deepspeed.transport import (
    available,
    extensions_dir,
    start,
    versions,
)

__all__ = ["extensions_dir"]

register(BackendEntry(
    name="deepspeed",
    description="DeepSpeed engine (ZeRO stages 0-3; gloo on CPU), started by the deepspeed launcher",
    start=start, available=available, versions=versions,
    launch=BackendLaunch(rank_env=launch_env, recipes=(
        LocalRecipe(launch=launch_local), SrunRecipe(plan=srun_plan), NodesRecipe(refuse=NODES_REFUSAL),
        SbatchRecipe(styles=SBATCH_STYLES, examples=SBATCH_EXAMPLES))),
))
