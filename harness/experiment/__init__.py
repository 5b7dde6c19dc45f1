"""The experiment (docs/ARCHITECTURE.md, "Data path"): cells resolved against the registries, sweep files, and the one
path that runs a sweep's cells into a run directory on any launcher."""
