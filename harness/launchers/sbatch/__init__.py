"""Batch scripts: the sbatch text every backend's launch block goes into (script.py, text.py), the recipe backends give it (recipe.py). Whole sweeps as jobs: harness/jobs/."""
