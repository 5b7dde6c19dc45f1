"""Launchers: how worker processes come to exist (local spawn, torchrun, Slurm) and learn their rank."""
