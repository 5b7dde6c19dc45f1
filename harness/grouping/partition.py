"""ByteScheduler's tensor partitioning (Peng et al., SOSP 2019): tensors cut into parts of a bounded size
(default 4 MB), each keeping its tensor's priority; the bytescheduler schemes and their simulations share it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Part:
    key: str
    """Stable name: `<param index>:<part index>`."""
    param: int
    """Index of the tensor this part belongs to."""
    offset: int
    """First element of the part in the flattened tensor."""
    numel: int
    """Elements in the part."""
    priority: int
    """Smaller is more urgent (layers near the input first)."""


def partition(numels: list[int], priorities: list[int], elem_bytes: int, part_bytes: int) -> list[Part]:
    """Split each tensor into parts of at most part_bytes (ByteScheduler's partitioning); small tensors
    stay whole. Parts inherit their tensor's priority; order: by tensor, then offset."""
    if part_bytes <= 0:
        raise ValueError("part_bytes must be positive")
    per = max(1, part_bytes // elem_bytes)
    parts = []
    for i, (n, prio) in enumerate(zip(numels, priorities)):
        for j, off in enumerate(range(0, max(n, 1), per)):
            parts.append(Part(f"{i}:{j}", i, off, min(per, n - off), prio))
    return parts
