"""Parameter server over torch.distributed point-to-point (gloo, CPU memory).

Keys are gradient partitions declared once by the workers; each key lives on one server (bytes
balanced, see harness.planning.assign_servers). A push is a small header (the key) followed by
the data tagged with the key; the server keeps one receiving thread per worker, because gloo's receive
handles report completion only through wait() and pushes arrive in each worker's own order. When all
workers have pushed a key, the server sums them in rank order (bitwise the same result for everyone)
and sends the sum back; the worker's pull is a receive posted at push time.
"""

from __future__ import annotations

import threading

import torch
import torch.distributed as dist

from harness.planning import assign_servers

CONTROL_TAG = 1 << 30   # header channel (key ids, or -1 = this worker is done)
STOP = -1


class PSClient:
    def __init__(self, workers: int, servers: int, rank: int):
        self.workers, self.servers, self.rank = workers, servers, rank
        self.keys: dict[str, int] = {}
        self.server_of: list[int] = []
        self.numel: list[int] = []
        self._headers: list[torch.Tensor] = []
        self._staging: dict[int, torch.Tensor] = {}

    def declare(self, keys: list[tuple[str, int]]) -> dict[str, int]:
        self.server_of = assign_servers([n for _, n in keys], self.servers)
        self.numel = [n for _, n in keys]
        self.keys = {name: i for i, (name, _) in enumerate(keys)}
        self._headers = [torch.tensor([i], dtype=torch.int64) for i in range(len(keys))]
        if self.rank == 0:
            for s in range(self.servers):
                dist.send_object_list([self.numel, self.server_of], dst=self.workers + s)
        return {name: self.server_of[i] for name, i in self.keys.items()}

    def push_pull(self, tensor: torch.Tensor, name: str):
        k = self.keys[name]
        dst = self.workers + self.server_of[k]
        buf = tensor
        after = None
        if tensor.device.type != "cpu":  # servers hold CPU memory: stage through host buffers
            buf = self._staging.get(k)
            if buf is None:
                buf = self._staging[k] = torch.empty(tensor.numel(), dtype=tensor.dtype, pin_memory=True)
            buf.copy_(tensor.reshape(-1))

            def after():
                tensor.reshape(-1).copy_(buf, non_blocking=False)
        works = [
            dist.isend(self._headers[k], dst=dst, tag=CONTROL_TAG),
            dist.isend(buf, dst=dst, tag=k),
            # The reply can only come after the server received every push, so receiving into the
            # buffer we sent from is safe and saves a copy.
            dist.irecv(buf, src=dst, tag=k),
        ]
        return works, after

    def stop(self) -> None:
        stop = torch.tensor([STOP], dtype=torch.int64)
        for s in range(self.servers):
            dist.send(stop, dst=self.workers + s, tag=CONTROL_TAG)


def serve(workers: int, servers: int, rank: int) -> None:
    """The server loop: runs until every worker has said STOP."""
    numel, server_of = _recv_table()
    me = rank - workers
    mine = [k for k, s in enumerate(server_of) if s == me]
    bufs = {k: [torch.empty(numel[k]) for _ in range(workers)] for k in mine}
    acc = {k: torch.empty(numel[k]) for k in mine}
    count = {k: 0 for k in mine}
    lock = threading.Lock()
    errors: list[BaseException] = []

    def receive_from(w: int) -> None:
        header = torch.zeros(1, dtype=torch.int64)
        try:
            while True:
                dist.recv(header, src=w, tag=CONTROL_TAG)
                k = int(header.item())
                if k == STOP:
                    return
                dist.recv(bufs[k][w], src=w, tag=k)
                with lock:
                    count[k] += 1
                    complete = count[k] == workers
                    if complete:
                        count[k] = 0
                if complete:
                    total = acc[k]
                    total.copy_(bufs[k][0])
                    for other in range(1, workers):
                        total.add_(bufs[k][other])
                    for works in [dist.isend(total, dst=d, tag=k) for d in range(workers)]:
                        works.wait()
        except BaseException as e:  # surfaced by the main thread; the cell then fails, not hangs
            errors.append(e)

    threads = [threading.Thread(target=receive_from, args=(w,), daemon=True) for w in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]


def _recv_table():
    box = [None, None]
    dist.recv_object_list(box, src=0)
    return box[0], box[1]
