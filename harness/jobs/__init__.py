"""Whole sweeps as Slurm batch jobs (docs/ARCHITECTURE.md, "Slurm"): splitting a sweep into jobs, submitting them,
merging their runs."""
