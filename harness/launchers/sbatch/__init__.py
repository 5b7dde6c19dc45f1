"""Batch scripts: the sbatch text every backend's launch block goes into (script.py); the spec and the recipe backends
give it: harness/contracts/recipes/sbatch.py. Whole sweeps as jobs: harness/jobs/."""
