"""The nodes' meeting place (harness/launchers/nodes/launcher.py has the protocol): torch.distributed's c10d
TCPStore on node 0, JSON values, and the heartbeat every node keeps in it."""

from __future__ import annotations

import datetime
import json
import os
import socket
import threading
import time

import torch.distributed as dist

from harness.core.errors import RunFailed
from harness.launchers.nodes.env import NodeJob

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


def open_store(job: NodeJob, timeout_s: float) -> dist.TCPStore:
    """Node 0 hosts the store; the others connect (retrying until node 0 listens or `timeout_s`)."""
    try:
        return dist.TCPStore(
            job.master_addr,
            job.master_port,
            is_master=job.node_rank == 0,
            timeout=datetime.timedelta(seconds=timeout_s),
            wait_for_workers=False,
        )
    except (RuntimeError, OSError, dist.DistStoreError) as e:
        who = "listen on" if job.node_rank == 0 else "reach node 0's store at"
        raise NodesFailed(
            f"node {job.node_rank} could not {who} {job.master_addr}:{job.master_port} within "
            f"{timeout_s:g} s ({str(e).splitlines()[0][:160]}); check the master address and port "
            f"({job.source}) and that node 0 is running `ddlbench sweep`"
        ) from None


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
