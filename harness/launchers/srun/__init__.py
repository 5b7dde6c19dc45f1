"""The srun launcher: a job step per cell inside a Slurm allocation (launcher.py, steps.py, tasks.py, warm.py), Slurm's
variables (env.py); the recipe backends give it and the step plans they build: harness/contracts/recipes/srun.py."""
