"""The worker's side of the `torch` backend's parameter server (gloo point-to-point, CPU memory).

Keys are gradient partitions declared once, in the same order, by every worker. ps_layout.py decides
where each goes: its server (bytes balanced) and, with the node-local reduce, which worker of each node
pushes it. For a key this worker pushes itself (it owns it, and alone or with its peers' copies summed in,
ps_node.py), a push is a header on the server's control channel then the data tagged with the key, and
the pull a receive posted at push time into the buffer sent from (the reply comes only after the server
has every push, so that is safe and saves a copy). For a key a peer owns, the push goes to that peer and
the pull comes from it.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import torch
import torch.distributed as dist

from harness.backends.torch_dist.handles import DeferredHandle, WorkHandle
from harness.backends.torch_dist.ps_layout import PSLayout
from harness.backends.torch_dist.ps_node import (
    LOCAL_CONTROL_TAG,
    LOCAL_TAG,
    RESULT_TAG,
    NodeAggregator,
    OwnerHandle,
)
from harness.backends.torch_dist.ps_server import ACK_TAG, CONTROL_TAG, STOP, send_table
from harness.backends.torch_dist.staging import Staged, Stager
from harness.contracts.transport import Handle


class PSClient:
    def __init__(
        self, workers: int, servers: int, rank: int, node_of_worker: list[int], local_reduce: bool, device: torch.device
    ):
        self.workers, self.servers, self.rank = workers, servers, rank
        self.stager = Stager(device)
        # one thread starts staged pushes in the order they were asked for (their hooks' order)
        self.sender = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ps-sender")
        self.node_of_worker, self.local_reduce = node_of_worker, local_reduce
        self.keys: dict[str, int] = {}
        self.layout: PSLayout | None = None
        self.agg: NodeAggregator | None = None
        self._headers: list[torch.Tensor] = []

    def declare(self, keys: list[tuple[str, int]]) -> dict[str, int]:
        numel = [n for _, n in keys]
        self.layout = PSLayout.build(numel, self.servers, self.node_of_worker, self.local_reduce)
        self.keys = {name: i for i, (name, _) in enumerate(keys)}
        self._headers = [torch.tensor([i], dtype=torch.int64) for i in range(len(keys))]
        if self.rank == 0:
            send_table(
                numel,
                list(self.layout.server_of),
                [list(self.layout.pushers(k)) for k in range(len(keys))],
                self.workers,
                self.servers,
            )
        group = self.layout.group_of(self.rank)
        if len(group) > 1:
            owned = [k for k in range(len(keys)) if self.layout.owner(k, self.rank) == self.rank]
            self.agg = NodeAggregator(self.rank, group, numel, owned, self._push)
        return {name: self.layout.server_of[i] for name, i in self.keys.items()}

    def _push(self, k: int, buf: torch.Tensor):
        """Send key k's (summed) copy to its server: (the send works, the pull's work; the sum lands in buf)."""
        dst = self.workers + self.layout.server_of[k]
        sends = [dist.isend(self._headers[k], dst=dst, tag=CONTROL_TAG), dist.isend(buf, dst=dst, tag=k)]
        return sends, dist.irecv(buf, src=dst, tag=k)

    def push_pull(self, tensor: torch.Tensor, name: str) -> Handle:
        """Start key `name`'s push-pull. A staged GPU partition (staging.py) is started by the sender
        thread once its copy to host memory has finished, so the gradient hook never waits for it."""
        k = self.keys[name]
        staged = self.stager.stage(k, tensor)
        if not staged.deferred:
            return self._start(k, staged)
        return DeferredHandle(self.sender.submit(self._start_when_ready, k, staged))

    def _start_when_ready(self, k: int, staged: Staged) -> Handle:
        staged.wait_ready()
        return self._start(k, staged)

    def _start(self, k: int, staged: Staged) -> Handle:
        buf, after = staged.buf, staged.after
        owner = self.layout.owner(k, self.rank)
        if owner != self.rank:  # a peer owns it: it goes there and comes back from there
            works = [
                dist.isend(self._headers[k], dst=owner, tag=LOCAL_CONTROL_TAG),
                dist.isend(buf, dst=owner, tag=LOCAL_TAG + k),
                dist.irecv(buf, src=owner, tag=RESULT_TAG + k),
            ]
            return WorkHandle(works, after, sent=2)
        if self.agg is None:  # alone in its group: straight to the server
            sends, pull = self._push(k, buf)
            return WorkHandle([*sends, pull], after, sent=2)
        return OwnerHandle(self.agg, self.agg.contribute(k, buf), after)

    def describe(self) -> dict:
        return self.layout.describe() if self.layout else {}

    def stop(self) -> None:
        """Say STOP on every channel this worker pushes on and wait until each receiver has acknowledged
        it, then until this worker has acknowledged its node peers' STOPs (ps_server.py: no rank leaves
        while a message is still on its way to it)."""
        self.sender.shutdown(wait=True)
        peers = [p for p in self.layout.group_of(self.rank) if p != self.rank] if self.layout else []
        channels = [(self.workers + s, CONTROL_TAG) for s in range(self.servers)]
        channels += [(p, LOCAL_CONTROL_TAG) for p in peers]
        stops = [torch.tensor([STOP], dtype=torch.int64) for _ in channels]
        acks = [torch.zeros(1, dtype=torch.int64) for _ in channels]
        works = [dist.irecv(ack, src=dst, tag=ACK_TAG) for ack, (dst, _) in zip(acks, channels)]
        works += [dist.isend(stop, dst=dst, tag=tag) for stop, (dst, tag) in zip(stops, channels)]
        for work in works:
            work.wait()
        if self.agg is not None:
            self.agg.stop()
