"""The small transport interface every scheme is written against (DESIGN section 2).

A scheme asks for an asynchronous sum of a tensor over the workers, either by all-reduce or by a
push-pull through parameter servers, and waits for it. Tensors carry a name (a stable key) and a
priority (smaller = more urgent; layers near the input first). Results are sums, in place; schemes
divide by the number of workers.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, Callable

import torch

from harness.registry import Registry


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


class DoneHandle(Handle):
    def wait(self) -> None:
        return None


class Transport(ABC):
    """What a scheme may ask of the network. `rank`/`workers` count workers only (never servers)."""

    rank: int
    workers: int
    device: torch.device
    """Device of the tensors the transport reduces (the worker's device)."""

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

    def shutdown(self) -> None:
        return None


@dataclass(frozen=True)
class BackendEntry:
    name: str
    """Registered name: torch | horovod | deepspeed | byteps."""
    description: str
    """One line for `ddlbench list`."""
    start: Callable[..., Any]
    """(cell, dist_env, device) -> Transport (worker) ; servers are run by `serve`."""
    serve: Callable[..., None] | None = None
    """(cell, dist_env) -> None: the parameter-server loop, for backends that have one."""
    available: Callable[[], str | None] = lambda: None
    """Returns None when usable here, else a one-line reason with the fix."""
    versions: Callable[[], dict] = field(default=lambda: {})
    """Library versions recorded in the environment table."""
    launch: Callable | None = None
    """How a cell on this backend is started on one box, the way its users start it (e.g. horovodrun):
    (cell, cell_dir, placement) -> result.json path. None = the generic local spawner."""


BACKENDS: Registry[BackendEntry] = Registry("backend")
