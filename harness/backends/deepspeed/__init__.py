"""Backend `deepspeed`: the ZeRO schemes (zero0..zero3) run inside a DeepSpeed engine. transport.py is
what the ranks run, launch.py how launchers start it (the `deepspeed` launcher on one box)."""

from harness.backends.base import BACKENDS, BackendEntry
from harness.backends.deepspeed.launch import (
    SBATCH_EXAMPLES,
    SBATCH_STYLES,
    launch_env,
    launch_local,
    srun_plan,
)
from harness.backends.deepspeed.transport import (
    available,
    extensions_dir,
    start,
    versions,
)

__all__ = ["extensions_dir"]

BACKENDS.register("deepspeed", BackendEntry(
    name="deepspeed",
    description="DeepSpeed engine (ZeRO stages 0-3; gloo on CPU), started by the deepspeed launcher",
    start=start, available=available, versions=versions, launch=launch_local, launch_env=launch_env,
    srun_plan=srun_plan, sbatch_styles=SBATCH_STYLES, sbatch_examples=SBATCH_EXAMPLES,
))
