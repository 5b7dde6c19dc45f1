"""The owner's side of the node-local reduce in the `torch` backend's parameter server (ps_layout.py).

Each worker of a node group owns some keys. For an owned key it gathers its peers' copies (each peer
sends a header on LOCAL_CONTROL_TAG, then its data tagged LOCAL_TAG + key; one receiving thread per
peer, always listening, so a peer's send completes whatever the owner is doing), adds them to its own
in the group's rank order, pushes the sum to the key's server, and when the pull has come back sends the
result to the peers (RESULT_TAG + key). The owner's handle completes when its peers have their result.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist

from harness.backends.torch_dist.ps_server import receive_pushes
from harness.contracts.transport import Handle

LOCAL_CONTROL_TAG = (1 << 30) + 1
"""Header channel from a peer to the owner of a key in its node group."""
LOCAL_TAG = 1 << 26
"""Tag base of a peer's copy of key k (LOCAL_TAG + k)."""
RESULT_TAG = 1 << 27
"""Tag base of the pulled sum of key k sent from the owner to its peers (RESULT_TAG + k)."""
FORWARDERS = 2
"""Threads waiting for pulls and forwarding them, so one slow pull does not hold up the others (one more
thread waits for the pushes, which leave in order on one connection)."""


class _Round:
    """One owned key in one iteration."""

    def __init__(self):
        self.arrived = 0
        self.own: torch.Tensor | None = None
        self.done = threading.Event()


class NodeAggregator:
    """Receives the peers' copies of this worker's owned keys and drives each key's push and pull."""

    def __init__(
        self,
        me: int,
        group: tuple[int, ...],
        numel: list[int],
        owned: list[int],
        push: Callable[[int, torch.Tensor], tuple[list, Any]],
    ):
        """`push(key, tensor) -> (send works, pull work)` sends a summed key to its server (ps.py)."""
        self.me, self.peers = me, [w for w in group if w != me]
        self.push = push
        self.inbox = {k: {p: torch.empty(numel[k]) for p in self.peers} for k in owned}
        self.rounds: dict[int, _Round] = {}
        self.lock = threading.Lock()
        self.errors: list[BaseException] = []
        self.pushes: queue.Queue = queue.Queue()
        self.pulls: queue.Queue = queue.Queue()
        self.threads = [threading.Thread(target=self._receive_from, args=(p,), daemon=True) for p in self.peers]
        self.threads += [threading.Thread(target=self._sent, daemon=True)]
        self.threads += [threading.Thread(target=self._forward, daemon=True) for _ in range(FORWARDERS)]
        for t in self.threads:
            t.start()

    def _round(self, k: int) -> _Round:
        with self.lock:
            return self.rounds.setdefault(k, _Round())

    def contribute(self, k: int, own: torch.Tensor) -> _Round:
        """This worker's own copy of key k (the buffer the result lands in)."""
        r = self._round(k)
        r.own = own
        self._arrive(k, r)
        return r

    def _arrive(self, k: int, r: _Round) -> None:
        with self.lock:
            r.arrived += 1
            if r.arrived <= len(self.peers):
                return
            del self.rounds[k]  # the next iteration's copies open a new round
        for p in self.peers:  # the group's rank order: every iteration sums the same way
            r.own.add_(self.inbox[k][p])
        sends, pull = self.push(k, r.own)
        self.pushes.put((k, r, sends, pull))

    def _receive_from(self, peer: int) -> None:
        try:
            receive_pushes(
                peer,
                LOCAL_CONTROL_TAG,
                lambda k: self.inbox[k][peer],
                lambda k: LOCAL_TAG + k,
                lambda k: self._arrive(k, self._round(k)),
            )
        except BaseException as e:  # surfaced by the handles; the cell then fails, not hangs
            self.errors.append(e)
            self.pushes.put(None)

    def _sent(self) -> None:
        """Wait for each push's sends to complete, in push order, then hand its pull to a forwarder."""
        try:
            while True:
                item = self.pushes.get()
                if item is None:
                    break
                k, r, sends, pull = item
                for work in sends:
                    work.wait()
                self.pulls.put((k, r, pull))
        except BaseException as e:
            self.errors.append(e)
        for _ in range(FORWARDERS):
            self.pulls.put(None)

    def _forward(self) -> None:
        try:
            while True:
                item = self.pulls.get()
                if item is None:
                    return
                k, r, pull = item
                pull.wait()
                for work in [dist.isend(r.own, dst=p, tag=RESULT_TAG + k) for p in self.peers]:
                    work.wait()
                r.done.set()
        except BaseException as e:
            self.errors.append(e)

    def check(self) -> None:
        if self.errors:
            raise RuntimeError(f"parameter-server node reduce failed: {self.errors[0]!r}") from self.errors[0]

    def stop(self) -> None:
        """After this worker's own STOPs: wait for the peers' (each receiving thread acknowledges its
        peer's STOP and ends), then end the push and pull threads."""
        for t in self.threads[: len(self.peers)]:
            t.join()
        self.pushes.put(None)
        self.check()


class OwnerHandle(Handle):
    """The owner's handle of one key: sent once handed to the aggregator, done once the peers have the
    pulled result."""

    def __init__(self, agg: NodeAggregator, r: _Round, after=None):
        self.agg, self.r, self.after = agg, r, after

    def wait_sent(self) -> None:
        """The owner's own copy has left its hands as soon as the aggregator holds it. Waiting here for the
        group's push would let a credit window deadlock: each owner's window full of its own keys, each
        waiting for the copies its peers cannot send while their windows are full of theirs."""
        self.agg.check()

    def wait(self) -> None:
        while not self.r.done.wait(timeout=1.0):
            self.agg.check()
        if self.after is not None:
            self.after()
            self.after = None
