"""The three rules by which ddlbench's schemes group gradients for communication, each one pure function that the
scheme and its simulation both call, so that a simulation plans exactly as the scheme it models:

- `merge_plan`: MG-WFBP's merge of consecutive gradients into one all-reduce (Shi, Chu, Li, INFOCOM 2019), under
  the cost model t(m) = alpha + beta * m (cost.py);
- `partition`: ByteScheduler's cut of tensors into parts of a bounded size (Peng et al., SOSP 2019);
- `assign_servers`: which parameter server holds each key, balancing bytes.
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.grouping.cost import comm_time


def merge_plan(backward_s: list[float], sizes_bytes: list[int], alpha: float, beta: float) -> list[list[int]]:
    """Group tensors given in backward (ready) order.

    backward_s[i] is the compute time that makes gradient i ready after gradient i-1 (the first from the
    start of backward). Walking in ready order, tensor i+1 joins the current group when the group's
    all-reduce could not start before gradient i+1 is ready anyway (the link is still busy), or when the
    wait for it is shorter than alpha (merging saves a start-up for less than it costs). Returns groups
    as lists of indices into the inputs, in ready order.
    """
    n = len(sizes_bytes)
    if n == 0:
        return []
    if len(backward_s) != n:
        raise ValueError("backward_s and sizes_bytes differ in length")
    ready = []
    t = 0.0
    for dt in backward_s:
        t += max(0.0, dt)
        ready.append(t)
    groups: list[list[int]] = [[0]]
    link_free = 0.0  # when the previously closed groups' communication ends
    for i in range(n - 1):
        group = groups[-1]
        start = max(link_free, ready[i])  # earliest start of the current group's all-reduce
        nxt = ready[i + 1]
        if start >= nxt or nxt - start < alpha:
            group.append(i + 1)
            continue
        link_free = start + comm_time(sum(sizes_bytes[j] for j in group), alpha, beta)
        groups.append([i + 1])
    return groups


@dataclass(frozen=True)
class Part:
    """One part of a tensor as ByteScheduler cuts it (default 4 MB), keeping its tensor's priority."""

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


def assign_servers(numels: list[int], servers: int) -> list[int]:
    """Place keys on servers: largest first onto the least-loaded server (ties: lowest index); the torch
    backend's parameter servers and the PS simulation place keys with it."""
    if servers < 1:
        raise ValueError("need at least one server")
    load = [0] * servers
    out = [0] * len(numels)
    for k in sorted(range(len(numels)), key=lambda k: (-numels[k], k)):
        s = min(range(servers), key=lambda s: (load[s], s))
        out[k] = s
        load[s] += numels[k]
    return out
