"""The srun launcher: a job step per cell inside a Slurm allocation (launcher.py, steps.py, tasks.py, warm.py), where
each rank goes and the context a backend plans its steps from (context.py), Slurm's variables (env.py); the recipe
backends give it and the types they build it from: harness/contracts/recipes/srun.py."""
