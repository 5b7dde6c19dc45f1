"""Backend `horovod`: Horovod's named asynchronous all-reduce with tensor fusion (gloo on CPU).
transport.py is what the ranks run, launch.py how launchers start it (horovodrun on one box)."""

from harness.backends.base import BACKENDS, BackendEntry
from harness.backends.horovod import launch, placed
from harness.backends.horovod.transport import available, device_check, start, versions

BACKENDS.register("horovod", BackendEntry(
    name="horovod",
    description="Horovod (gloo on CPU): named async all-reduce with tensor fusion, started by horovodrun",
    start=start, available=available, device_check=device_check, versions=versions, launch=launch.launch_local,
    dist_env=launch.horovodrun_dist_env,
    srun_plan=launch.srun_plan, srun_session=launch.srun_session, srun_variant=launch.srun_variant,
    placed_session=placed.placed_session,
    task_envs={"horovod": launch.horovod_task_env, "horovodrun": launch.horovodrun_task_env},
    sbatch_styles=launch.SBATCH_STYLES, sbatch_examples=launch.SBATCH_EXAMPLES,
))
