"""Moved to harness.planning (a neutral module: schemes and the predictor both import it, so neither
imports the other's package to reach it). This name stays only until harness/backends/ps.py imports
harness.planning directly; nothing else should import it."""

from harness.planning import assign_servers  # noqa: F401
