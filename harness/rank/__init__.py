"""The rank side (docs/ARCHITECTURE.md, "Data path"): the entry points of the processes a launcher starts: a benchmark
rank or parameter server (worker.py), a commbench rank (commbench.py)."""
