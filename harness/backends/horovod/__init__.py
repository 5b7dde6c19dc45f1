"""Backend `horovod`: Horovod's named asynchronous all-reduce with tensor fusion (gloo on CPU).
transport.py is what the ranks run, launch.py how launchers start it (horovodrun on one box)."""

from harness.backends.base import BackendEntry, register
from harness.backends.horovod import launch, placed
from harness.backends.horovod.transport import available, device_check, start, versions
from harness.launch.recipes import (
    BackendLaunch,
    LocalRecipe,
    NodesRecipe,
    PlacedRecipe,
    SbatchRecipe,
    SrunRecipe,
)

register(BackendEntry(
    name="horovod",
    description="Horovod (gloo on CPU): named async all-reduce with tensor fusion, started by horovodrun",
    start=start, available=available, device_check=device_check, versions=versions,
    launch=BackendLaunch(identity=launch.horovodrun_dist_env, recipes=(
        LocalRecipe(launch=launch.launch_local),
        SrunRecipe(plan=launch.srun_plan, session=launch.srun_session, variant=launch.srun_variant,
                   task_envs={"horovod": launch.horovod_task_env, "horovodrun": launch.horovodrun_task_env}),
        PlacedRecipe(session=placed.placed_session),
        NodesRecipe(refuse=launch.NODES_REFUSAL),
        SbatchRecipe(styles=launch.SBATCH_STYLES, examples=launch.SBATCH_EXAMPLES))),
))
