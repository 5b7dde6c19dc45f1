"""Which network a rank's collectives use, for every backend built on gloo or NCCL (docs/ARCHITECTURE.md,
"What listens where"). Libraries pick their interface themselves unless told: gloo takes what the
hostname resolves to (127.0.1.1 on Debian-style hosts, so ranks on other nodes are told a loopback
address), NCCL skips loopback but may take the management network. So before joining the group a rank
names the interface for every library:

- a network profile or the user already named it (GLOO_SOCKET_IFNAME set): kept;
- else the interface of this node's route to the rendezvous address (`ip route get`; on the rendezvous
  node, the interface holding that address); on a multi-node run a route through `lo` is refused.

The choice is returned as facts recorded with the rank (interface, this rank's address, why).
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import MutableMapping

from harness.contracts.identity import RankIdentity
from harness.networks.netif import read_counters, refuse_loopback, route_towards

IFNAME_VARS = ("GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME", "TP_SOCKET_IFNAME")
"""gloo's, NCCL's and tensorpipe's interface variables (GLOO_SOCKET_IFNAME takes one concrete name)."""


def _literal_loopback(addr: str) -> bool:
    try:
        return ipaddress.ip_address(addr).is_loopback
    except ValueError:
        return False


def choose_interface(me: RankIdentity, environ: MutableMapping[str, str] | None = None) -> dict:
    """Name the interface for every library in `environ` (default: this process's) unless named already;
    returns {"iface", "iface_addr", "iface_source"} for the rank's record."""
    environ = os.environ if environ is None else environ
    given = environ.get("GLOO_SOCKET_IFNAME")
    if given:
        read_counters([given])  # a profile naming an interface this node lacks: one clear error
        for var in IFNAME_VARS[1:]:
            environ.setdefault(var, given)
        return {"iface": given, "iface_addr": "", "iface_source": "given (GLOO_SOCKET_IFNAME)"}
    route = route_towards(me.master_addr)
    if me.nodes > 1 and not _literal_loopback(me.master_addr):
        # A name that resolves to loopback (Debian's 127.0.1.1 hostname) sends every node to itself. A
        # literal 127.x rendezvous is a deliberate one-host emulation (the local Slurm's nodes all are
        # this host), where loopback is right.
        refuse_loopback(route.dev, route.dest)
    for var in IFNAME_VARS:
        environ.setdefault(var, route.dev)
    return {"iface": route.dev, "iface_addr": route.src or "", "iface_source": f"route to {me.master_addr}"}
