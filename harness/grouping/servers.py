"""Parameter-server key placement: which server holds each key, balancing bytes; the torch backend's
parameter servers and the PS simulation place keys with the same function."""

from __future__ import annotations


def assign_servers(numels: list[int], servers: int) -> list[int]:
    """Place keys on servers: largest first onto the least-loaded server (ties: lowest index)."""
    if servers < 1:
        raise ValueError("need at least one server")
    load = [0] * servers
    out = [0] * len(numels)
    for k in sorted(range(len(numels)), key=lambda k: (-numels[k], k)):
        s = min(range(servers), key=lambda s: (load[s], s))
        out[k] = s
        load[s] += numels[k]
    return out
