"""Backend `horovod`: Horovod's named asynchronous all-reduce with tensor fusion (gloo on CPU).
transport.py is what the ranks run, launch.py how launchers start it (horovodrun on one box)."""

from harness.backends.horovod import launch, placed
from harness.backends.horovod.transport import available, device_check, start, versions
from harness.contracts.backend import BackendEntry, BackendLaunch
from harness.contracts.recipes.local import LocalRecipe
from harness.contracts.recipes.nodes import NodesRecipe
from harness.contracts.recipes.sbatch import SbatchRecipe
from harness.contracts.recipes.srun import SrunRecipe
from harness.contracts.recipes.testbed import PlacedRecipe

ENTRY = BackendEntry(
    name="horovod",
    description="Horovod (gloo on CPU): named async all-reduce with tensor fusion, started by horovodrun",
    provides=frozenset({"allreduce", "reduce_scatter", "all_gather", "horovod_engine"}),
    library="horovod",
    start=start,
    available=available,
    device_check=device_check,
    versions=versions,
    launch=BackendLaunch(
        identity=launch.horovodrun_identity,
        recipes=(
            LocalRecipe(launch=launch.launch_local),
            SrunRecipe(
                plan=launch.srun_plan,
                session=launch.srun_session,
                variant=launch.srun_variant,
                task_envs={"horovod": launch.horovod_task_env, "horovodrun": launch.horovodrun_task_env},
            ),
            PlacedRecipe(session=placed.placed_session),
            NodesRecipe(refuse=launch.NODES_REFUSAL),
            SbatchRecipe(styles=launch.SBATCH_STYLES, examples=launch.SBATCH_EXAMPLES, sweeps=launch.SBATCH_SWEEPS),
        ),
    ),
)
"""What harness.backends.load() registers for this backend."""
