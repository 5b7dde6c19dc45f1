"""Launchers (docs/ARCHITECTURE.md, "Launcher"): one folder per way a cell's ranks come to exist (local, srun, nodes,
testbed; sbatch renders batch scripts), each with its environment reading and the recipe type backends give it.
Importing this package registers them all."""
