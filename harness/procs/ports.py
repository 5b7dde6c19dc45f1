"""TCP ports for a cell's rendezvous: one free now, or the asked one unless it is taken here."""

from __future__ import annotations

import socket


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port free on `host` right now (the OS picks it)."""
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def usable_port(port: int, on_this_host: bool) -> int:
    """`port`, or the next free one when rank 0 will listen on this very host and it is taken."""
    if not on_this_host:
        return port
    for p in range(port, port + 64):
        with socket.socket() as s:
            try:
                s.bind(("", p))
                return p
            except OSError:
                continue
    return port
