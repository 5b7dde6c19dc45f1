"""Where a cell's ranks run when a launcher places them off this box's defaults (docs/ARCHITECTURE.md,
"Launcher"): the emulated testbed's namespaces, a multi-node job's hosts. A launcher that runs ranks on
this box takes the placement another launcher gives it."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Placement:
    master_addr: str = "127.0.0.1"
    """Address rank 0 listens on for the rendezvous."""
    prefixes: tuple = ()
    """Per rank: argv prefix that runs the rank where it belongs (empty = this host)."""
    envs: tuple = ()
    """Per rank: extra environment variables (e.g. GLOO_SOCKET_IFNAME)."""
    nodes: int = 1
    """Hosts the ranks span."""
    extra_env: dict = field(default_factory=dict)
    """Environment for every rank."""
