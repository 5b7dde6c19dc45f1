"""The `byteps` backend's transport: BytePS's push-pull through its own parameter servers, written against BytePS's
documented API (byteps.torch as bps: init, push_pull_async_inplace, synchronize, broadcast_parameters).

BytePS cannot be installed on a CPU-only machine (its build needs CUDA and NCCL, and its last release
does not build against current torch): `available()` says so and `ddlbench run --backend byteps` stops
with that one line and exit status 2; it never falls back to another backend.

Its three roles (scheduler, servers, workers) and their layout: roles.py.
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Callable
from typing import Any

import torch

from harness.contracts.transport import Handle, Transport
from harness.core.errors import UserError

WHY = (
    "backend byteps is not available here: BytePS is not installed and cannot be on this machine "
    "(its build needs CUDA and NCCL and does not support current torch); use the -ps schemes on "
    "backend torch for parameter-server results"
)


class _BpsHandle(Handle):
    def __init__(self, bps, handle):
        self.bps, self.handle = bps, handle

    def wait(self) -> None:
        if self.handle is not None:
            self.bps.synchronize(self.handle)
            self.handle = None


def gather_by_sum(obj: Any, rank: int, workers: int, total: Callable[[torch.Tensor, str], None], device="cpu") -> list:
    """Every worker's `obj` (JSON-serialisable), gathered with nothing but sums, BytePS's only collective:
    each rank writes its encoded bytes into its own row of a zero matrix (row widths agreed by a first
    sum of lengths), and the sum of the matrices holds every row. `total(t, what)` sums `t` in place over
    the workers; bytes and lengths are exact in float32 (below 2^24)."""
    data = json.dumps(obj).encode()
    lengths = torch.zeros(workers, device=device)
    lengths[rank] = len(data)
    total(lengths, "lengths")
    width = max(1, int(lengths.max().item()))
    rows = torch.zeros(workers, width, device=device)
    rows[rank, : len(data)] = torch.tensor(list(data), dtype=torch.float32, device=device)
    total(rows, "rows")
    return [
        json.loads(bytes(rows[r, : int(lengths[r].item())].round().to(torch.uint8).tolist())) for r in range(workers)
    ]


class BytePSTransport(Transport):
    """push-pull is BytePS's primitive: sums through its servers (average=False)."""

    def __init__(self, cell, me, device):
        import byteps.torch as bps  # optional: only this backend needs BytePS

        self.bps = bps
        bps.init()
        self.rank, self.workers, self.device = bps.rank(), bps.size(), device
        self._n = 0

    @property
    def servers(self) -> int:
        return int(os.environ.get("DMLC_NUM_SERVER", "0"))

    def declare_keys(self, keys):
        return {name: 0 for name, _ in keys}  # BytePS assigns keys to servers itself

    def push_pull_async(self, tensor, name, priority=0) -> Handle:
        return _BpsHandle(
            self.bps, self.bps.push_pull_async_inplace(tensor, average=False, name=name, priority=-priority)
        )

    allreduce_async = push_pull_async  # BytePS's only collective; the sum is the same

    def barrier(self) -> None:
        self.allreduce_async(torch.zeros(1, device=self.device), "ddlbench.barrier").wait()

    def broadcast_object(self, obj: Any, src: int = 0) -> Any:
        self._n += 1
        return self.bps.broadcast_object(obj, root_rank=src, name=f"ddlbench.bcast.{self._n}")

    def gather_object(self, obj: Any, dst: int = 0):
        self._n += 1
        n = self._n

        def total(t: torch.Tensor, what: str) -> None:
            self.push_pull_async(t, f"ddlbench.gather.{n}.{what}").wait()

        everything = gather_by_sum(obj, self.rank, self.workers, total, self.device)
        return everything if self.rank == dst else None

    def allreduce_min_(self, tensor) -> None:
        raise UserError("backend byteps has no min-reduction (push-pull only sums)")

    def shutdown(self) -> None:
        self.bps.shutdown()


@functools.lru_cache(maxsize=1)
def available() -> str | None:
    try:
        import byteps.torch  # noqa: F401  (optional: only this backend needs BytePS)
    except Exception:
        return WHY
    return None


def versions() -> dict:
    import byteps  # optional: only this backend needs BytePS

    return {"byteps": getattr(byteps, "__version__", "?"), "torch": torch.__version__}
