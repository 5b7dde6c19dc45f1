"""Batch scripts: the sbatch text every backend's launch block goes into, and the check of its spec (script.py); the
spec and the recipe backends give it: harness/contracts/recipes/sbatch.py. Whole sweeps as jobs: harness/jobs/."""
