"""The small transport interface every scheme is written against (docs/ARCHITECTURE.md, "Transport").

A scheme asks for an asynchronous sum of a tensor over the workers, either by all-reduce or by a
push-pull through parameter servers, and waits for it. Tensors carry a name (a stable key) and a
priority (smaller = more urgent; layers near the input first). Results are sums, in place; schemes
divide by the number of workers. A scheme that splits the all-reduce (dear, FSDP's pattern) asks
for its two halves, a reduce-scatter and an all-gather, where the backend has them.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

import torch

from harness.core.errors import UserError


class Handle(ABC):
    """One outstanding operation."""

    @abstractmethod
    def wait(self) -> None:
        """Block until the tensor holds the sum over all workers."""

    def wait_sent(self) -> None:
        """Block until this worker's own data has left (a push-pull's push). Schedulers release credit
        here: a pull also needs every other worker's push, so waiting for it under a credit window
        could deadlock workers that chose different orders. All-reduce: the same as wait()."""
        self.wait()


class Transport(ABC):
    """What a scheme may ask of the network. `rank`/`workers` count workers only (never servers)."""

    rank: int
    workers: int
    device: torch.device
    """Device of the tensors the transport reduces (the worker's device)."""
    facts: dict
    """What the rank records about its transport (e.g. the network interface it chose and why)."""

    def __new__(cls, *args, **kwargs):
        self = super().__new__(cls)
        self.facts = {}
        return self

    @abstractmethod
    def allreduce_async(self, tensor: torch.Tensor, name: str, priority: int = 0) -> Handle:
        """Start an in-place sum of `tensor` over all workers."""

    def push_pull_async(self, tensor: torch.Tensor, name: str, priority: int = 0) -> Handle:
        """Push `tensor` (a declared key) to its server, which sums all workers' pushes; pull the sum
        back into `tensor`. Backends without parameter servers raise UserError at cell set-up."""
        raise NotImplementedError

    def declare_keys(self, keys: list[tuple[str, int]]) -> dict[str, int]:
        """Declare push-pull keys (name, numel) once, in the same order on every worker; returns the
        server index each key is assigned to."""
        raise NotImplementedError

    def reduce_scatter_async(self, tensor: torch.Tensor, out: torch.Tensor, name: str, priority: int = 0) -> Handle:
        """Start a reduce-scatter: `out` receives this worker's chunk of the sum over all workers of
        `tensor` (1-D, `workers * out.numel()` elements; worker r's chunk is elements [r*n, (r+1)*n)).
        `tensor` is not modified. Backends without the primitive refuse (docs/ARCHITECTURE.md, "Transport")."""
        raise UserError(self._lacks("reduce-scatter"))

    def all_gather_async(self, tensor: torch.Tensor, out: torch.Tensor, name: str, priority: int = 0) -> Handle:
        """Start an all-gather: `out` (1-D, `workers * tensor.numel()` elements) receives every worker's
        `tensor`, worker r's at elements [r*n, (r+1)*n)."""
        raise UserError(self._lacks("all-gather"))

    def _lacks(self, what: str) -> str:
        backend = type(self).__module__.split(".")[-2] if type(self).__module__.count(".") >= 2 else type(self).__name__
        return (
            f"backend {backend} has no asynchronous {what} in ddlbench's transport; run schemes that split "
            f"the all-reduce (dear) on backend torch or horovod"
        )

    @property
    def servers(self) -> int:
        return 0

    @abstractmethod
    def barrier(self) -> None: ...

    @abstractmethod
    def broadcast_object(self, obj: Any, src: int = 0) -> Any: ...

    @abstractmethod
    def gather_object(self, obj: Any, dst: int = 0) -> list | None: ...

    @abstractmethod
    def allreduce_min_(self, tensor: torch.Tensor) -> None:
        """Blocking element-wise minimum over workers (used by schedulers to agree on readiness)."""

    def describe(self) -> dict:
        """Facts about how the transport moves the data (e.g. the parameter server's node groups)."""
        return {}

    def shutdown(self) -> None:
        return None
