"""Processes (docs/ARCHITECTURE.md, "Launcher"): starting a rank's process, its environment and log, killing its group,
and the one supervisor that decides a cell's outcome from its processes. Generic: no launcher, no backend."""
