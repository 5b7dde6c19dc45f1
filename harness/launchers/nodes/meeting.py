"""The nodes' meeting place (harness/launchers/nodes/launcher.py has the protocol): torch.distributed's c10d
TCPStore on node 0, JSON values, and the heartbeat every node keeps in it."""

from __future__ import annotations

import datetime
import ipaddress
import json
import os
import socket
import threading
import time

import torch.distributed as dist

from harness.core.errors import RunFailed
from harness.launchers.nodes.env import NodeJob
from harness.launchers.nodes.secret import open_note, sign_note

BEAT_S = 1.0
"""Seconds between heartbeats."""
LOST_S = float(os.environ.get("DDLBENCH_NODE_LOST_S", "15"))
"""A node whose heartbeat has not moved for this long is lost (the variable is for tests)."""
GRACE_S = 30.0
"""Beyond a cell's timeout, how long the leader waits for the other nodes' outcomes."""


class NodesFailed(RunFailed):
    """The job cannot go on (a node never joined, or was lost): one line for the user; exit status 1."""


def _put(store, key: str, value) -> None:
    store.set(key, json.dumps(value))


def _get(store, key: str):
    return json.loads(store.get(key).decode())


def store_address(master_addr: str) -> str | None:
    """The one address node 0's store listens on: `master_addr` itself when every address it names is this
    node's own and none is a loopback address the other nodes cannot reach (an IP of this node, or a name
    that resolves only to such IPs); a name that resolves to loopback here (Debian's 127.0.1.1 for the
    hostname), to several addresses, to none, or to another host's gives None: every address, as torchrun's
    store (README.md, "What listens"). A loopback address given as such (every node on one box) is kept."""
    try:
        infos = socket.getaddrinfo(master_addr, None, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        return None
    ips = sorted({info[4][0] for info in infos})
    if len(ips) != 1:
        return None
    ip = ipaddress.ip_address(ips[0])
    if ip.is_loopback and ips[0] != master_addr:
        return None  # a hostname resolving to loopback on node 0 only: the others arrive on another address
    try:
        with socket.socket(socket.AF_INET6 if ip.version == 6 else socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind((ips[0], 0))  # only this node's own addresses bind
    except OSError:
        return None
    return ips[0]


def _listener(ip: str, port: int) -> socket.socket:
    """A socket listening on `ip`:`port` alone, for the store to serve on (TCPStore's master_listen_fd)."""
    s = socket.socket(socket.AF_INET6 if ":" in ip else socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((ip, port))
    s.listen(socket.SOMAXCONN)
    return s


_LISTENERS: list[socket.socket] = []
"""The stores' listening sockets, kept open as long as this process (the store serves on their descriptors)."""


def open_store(job: NodeJob, timeout_s: float) -> dist.TCPStore:
    """Node 0 hosts the store, on `store_address(master_addr)` alone where there is one, else on every address;
    the others connect (retrying until node 0 listens or `timeout_s`)."""
    lead = job.node_rank == 0
    listener = None
    try:
        if lead and (ip := store_address(job.master_addr)) is not None:
            listener = _listener(ip, job.master_port)
        store = dist.TCPStore(
            job.master_addr,
            job.master_port,
            is_master=lead,
            timeout=datetime.timedelta(seconds=timeout_s),
            wait_for_workers=False,
            master_listen_fd=listener.fileno() if listener else None,
        )
    except (RuntimeError, OSError, dist.DistStoreError) as e:
        if listener is not None:  # no store serves on it: the port is free again
            listener.close()
        who = "listen on" if lead else "reach node 0's store at"
        raise NodesFailed(
            f"node {job.node_rank} could not {who} {job.master_addr}:{job.master_port} within "
            f"{timeout_s:g} s ({str(e).splitlines()[0][:160]}); check the master address and port "
            f"({job.source}) and that node 0 is running `ddlbench sweep`"
        ) from None
    if listener is not None:
        _LISTENERS.append(listener)
    return store


class Notes:
    """done/N/K and fail/N as this node writes and reads them (harness/launchers/nodes/secret.py): signed with the
    job secret and the writer's nonce; a note that fails its check is not read, and its key is kept in `forged`."""

    def __init__(self, store, secret: bytes | None, me: int, nonce: str):
        self.store, self.secret, self.me = store, secret, me
        self.nonces = {str(me): nonce}
        self.forged: list[str] = []

    def know(self, nonces: dict) -> None:
        """Other nodes' nonces (node 0 learns them as the nodes join, the others from each signed cell/N)."""
        self.nonces.update({str(k): str(v) for k, v in nonces.items()})

    def put(self, key: str, value: dict) -> None:
        self.store.set(key, sign_note(self.secret, key, self.me, self.nonces[str(self.me)], value))

    def get(self, key: str) -> dict | None:
        """The note under `key`; None when there is none, or none this job's nodes wrote."""
        if not self.store.check([key]):
            return None
        value = open_note(self.secret, self.store.get(key), key, self.nonces)
        if value is None and key not in self.forged:
            self.forged.append(key)
        return value

    def stranger(self) -> str:
        """What a stranger wrote, for a failure's reason ("" when nothing)."""
        if not self.forged:
            return ""
        return (
            f"; {', '.join(self.forged)} in the store were not written by this job's nodes (refused, not read): "
            f"keep strangers off the store's port, give every node the same job secret"
        )


class Heart:
    """Adds to beat/K every BEAT_S on a thread; `lost()` names the nodes whose beat stopped moving."""

    def __init__(self, store, job: NodeJob):
        self.store, self.job = store, job
        self.broken: str | None = None  # the store went away (the leader died)
        self._seen: dict[int, tuple[int, float]] = {}
        self._stop = threading.Event()
        threading.Thread(target=self._beat, name="node-heartbeat", daemon=True).start()

    def _beat(self) -> None:
        while not self._stop.is_set():
            try:
                self.store.add(f"beat/{self.job.node_rank}", 1)
            except Exception as e:  # the connection to node 0 broke
                self.broken = str(e).splitlines()[0] if str(e) else type(e).__name__
                return
            self._stop.wait(BEAT_S)

    def lost(self, nodes) -> list[int]:
        now = time.monotonic()
        out = []
        for k in nodes:
            if k == self.job.node_rank:
                continue
            count = self.store.add(f"beat/{k}", 0)
            last = self._seen.get(k)
            if last is None or last[0] != count:
                self._seen[k] = (count, now)
            elif now - last[1] > LOST_S:
                out.append(k)
        return out

    def stop(self) -> None:
        self._stop.set()


def address_towards(host: str) -> str:
    """This node's address on its route to `host` (the rendezvous address the ranks are given)."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect((socket.gethostbyname(host), 9))
            return s.getsockname()[0]
    except OSError:
        return host
