"""The parameter-server loop of the `torch` backend (one process per server; gloo point-to-point, CPU memory).

Rank 0 sends the key table once (elements per key, its server, the workers that push it). The server keeps
one receiving thread per worker, because gloo's receive handles report completion only through wait()
and pushes arrive in each worker's own order. A push is a header (the key) on the control channel, then
the data tagged with the key. Each arriving push is added into the key's sum at once, so summing overlaps
the network (BytePS's servers do the same); when the key's last pusher has arrived the sum is sent back to
every pusher: the same bytes to all, so every worker ends with a bitwise identical result.

Stopping (docs/ARCHITECTURE.md, "What listens where"): a worker sends STOP on every channel it pushes on (its
servers, its node peers) and waits for each receiver's acknowledgement; a receiver acknowledges a STOP
only after its last read from that sender, and no rank leaves before it has acknowledged every STOP sent
to it. So no rank exits while a message is still on its way to it: a rank that left first made its peers'
stop messages fail ("Connection closed by peer", issue 24) and lost a measured cell.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import torch
import torch.distributed as dist

CONTROL_TAG = 1 << 30
"""Header channel from a worker to a server: key ids, or STOP."""
STOP = -1
"""Header that says a worker is done."""
ACK_TAG = (1 << 30) + 2
"""Channel on which a STOP's receiver acknowledges it (see `receive_pushes`)."""


class _Key:
    """One key's state on its server."""

    def __init__(self, numel: int, pushers: tuple[int, ...]):
        self.pushers = pushers
        self.inbox = {w: torch.empty(numel) for w in pushers}
        # Two sums, used in turn: a pusher that already got round r's sum may push round r+1 while the
        # sum of round r is still being sent to the others; round r+2 cannot start before every pusher
        # has received round r (each waits for its pull before its next iteration).
        self.totals = (torch.empty(numel), torch.empty(numel))
        self.round = 0
        self.arrived = 0
        self.lock = threading.Lock()

    def add(self, w: int) -> torch.Tensor | None:
        """Fold worker w's push into this round's sum; the sum when w was the round's last pusher."""
        with self.lock:
            total = self.totals[self.round % 2]
            if self.arrived == 0:
                total.copy_(self.inbox[w])
            else:
                total.add_(self.inbox[w])
            self.arrived += 1
            if self.arrived < len(self.pushers):
                return None
            self.arrived = 0
            self.round += 1
            return total


def receive_pushes(
    src: int,
    control_tag: int,
    buffer_of: Callable[[int], torch.Tensor],
    tag_of: Callable[[int], int],
    arrived: Callable[[int], None],
) -> None:
    """The receiving side of pushes from one sender, until it says STOP, which is acknowledged: a header
    with the key on `control_tag`, then the data into `buffer_of(key)` on `tag_of(key)`, then
    `arrived(key)`. One thread per sender, because gloo's receive handles report completion only through
    wait() and each sender pushes in its own order (the servers, and the owners of the node-local reduce,
    ps_node.py)."""
    header = torch.zeros(1, dtype=torch.int64)
    while True:
        dist.recv(header, src=src, tag=control_tag)
        k = int(header.item())
        if k == STOP:
            dist.send(torch.tensor([STOP], dtype=torch.int64), dst=src, tag=ACK_TAG)
            return
        dist.recv(buffer_of(k), src=src, tag=tag_of(k))
        arrived(k)


def serve(workers: int, servers: int, rank: int) -> None:
    """Run until every worker has said STOP (and been acknowledged)."""
    box = [None]
    dist.recv_object_list(box, src=0)
    numel, server_of, pushers = box[0]
    me = rank - workers
    keys = {k: _Key(numel[k], tuple(pushers[k])) for k, s in enumerate(server_of) if s == me}
    errors: list[BaseException] = []

    def reply_when_complete(w: int, k: int) -> None:
        total = keys[k].add(w)
        if total is not None:
            for work in [dist.isend(total, dst=d, tag=k) for d in keys[k].pushers]:
                work.wait()

    def receive_from(w: int) -> None:
        try:
            receive_pushes(w, CONTROL_TAG, lambda k: keys[k].inbox[w], lambda k: k, lambda k: reply_when_complete(w, k))
        except BaseException as e:  # surfaced by the main thread; the cell then fails, not hangs
            errors.append(e)

    threads = [threading.Thread(target=receive_from, args=(w,), daemon=True) for w in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]


def send_table(numel: list[int], server_of: list[int], pushers: list[list[int]], workers: int, servers: int) -> None:
    """Rank 0 tells every server the key table."""
    for s in range(servers):
        dist.send_object_list([[list(numel), list(server_of), [list(p) for p in pushers]]], dst=workers + s)
