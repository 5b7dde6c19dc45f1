"""Backend `deepspeed`: the ZeRO schemes (zero0..zero3) run inside a DeepSpeed engine. transport.py is
what the ranks run, launch.py how launchers start it (the `deepspeed` launcher on one box)."""

from harness.backends.deepspeed.launch import (
    NODES_REFUSAL,
    SBATCH_EXAMPLES,
    SBATCH_STYLES,
    SBATCH_SWEEPS,
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
from harness.contracts.backend import BackendEntry, BackendLaunch
from harness.contracts.recipes.local import LocalRecipe
from harness.contracts.recipes.nodes import NodesRecipe
from harness.contracts.recipes.sbatch import SbatchRecipe
from harness.contracts.recipes.srun import SrunRecipe

__all__ = ["extensions_dir"]

ENTRY = BackendEntry(
    name="deepspeed",
    description="DeepSpeed engine (ZeRO stages 0-3; gloo on CPU), started by the deepspeed launch program",
    provides=frozenset({"deepspeed_engine"}),
    library="deepspeed",
    start=start,
    available=available,
    versions=versions,
    launch=BackendLaunch(
        rank_env=launch_env,
        recipes=(
            LocalRecipe(launch=launch_local),
            SrunRecipe(plan=srun_plan),
            NodesRecipe(refuse=NODES_REFUSAL),
            SbatchRecipe(styles=SBATCH_STYLES, examples=SBATCH_EXAMPLES, sweeps=SBATCH_SWEEPS),
        ),
    ),
)
"""What harness.backends.load() registers for this backend."""
