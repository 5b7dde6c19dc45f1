"""MG-WFBP's grouping of consecutive gradients (Shi, Chu, Li, INFOCOM 2019), under the all-reduce cost model
t(m) = alpha + beta * m (cost.py); the mgwfbp scheme and its simulation plan with the same function."""

from __future__ import annotations

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
