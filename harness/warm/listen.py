"""Where a zygote (harness/warm/zygote.py) meets its one client: a Unix socket on this box, or a TCP port
of a node of a Slurm allocation (docs/ARCHITECTURE.md, "Warm ranks")."""

from __future__ import annotations

import hmac
import json
import os
import socket
import time

TOKEN_VAR = "DDLBENCH_ZYGOTE_TOKEN"
"""The secret a TCP client proves it is the driver with (the zygote takes it out of its environment)."""
HELLO_TIMEOUT_S = 10.0
"""With TCP: how long a connection may take to send the token."""


def accept_unix(path: str) -> socket.socket:
    """Listen on the Unix socket `path`, accept one client, and remove the socket (nobody else can connect)."""
    if os.path.exists(path):
        os.unlink(path)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(1)
    conn, _ = listener.accept()
    listener.close()
    os.unlink(path)
    return conn


def accept_tcp(folder: str, token: str, timeout_s: float) -> socket.socket:
    """Listen on a free TCP port of every address, announce it in FOLDER/zygote.NODE.json, and return the
    first connection whose first line is `token` (others are closed); SystemExit after `timeout_s`."""
    if socket.has_dualstack_ipv6():
        listener = socket.create_server(("", 0), family=socket.AF_INET6, dualstack_ipv6=True)
    else:
        listener = socket.create_server(("", 0))
    node = os.environ.get("SLURMD_NODENAME") or socket.gethostname()
    path = os.path.join(folder, f"zygote.{node}.json")
    with open(path + ".tmp", "w") as f:
        json.dump({"node": node, "port": listener.getsockname()[1], "pid": os.getpid()}, f)
    os.replace(path + ".tmp", path)
    deadline = time.monotonic() + timeout_s
    with listener:
        while time.monotonic() < deadline:
            listener.settimeout(max(0.1, deadline - time.monotonic()))
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                break
            conn.settimeout(HELLO_TIMEOUT_S)
            if hmac.compare_digest(_first_line(conn), token.encode()):
                conn.settimeout(None)
                return conn
            conn.close()
    raise SystemExit(f"zygote: no client came within {timeout_s:g} s; exiting")


def _first_line(conn: socket.socket, limit: int = 256) -> bytes:
    """The first line a connection sends (byte by byte: nothing after it is consumed), b"" on a timeout."""
    line = b""
    try:
        while len(line) < limit:
            ch = conn.recv(1)
            if not ch or ch == b"\n":
                break
            line += ch
    except OSError:
        return b""
    return line.strip()
