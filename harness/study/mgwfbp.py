"""The study's MG-WFBP merge rule (docs/ARCHITECTURE.md, "The study's wing"): the authors' recurrence from
their optimizer, which the study's Horovod stack carries as its `Stack.mgwfbp_merge` (harness/study/cluster.py)
in place of ddlbench's merge_plan (harness/grouping/rules.py)."""

from __future__ import annotations

from harness.sim.model import ELEM_BYTES

SMALL_ELEMENTS = 8192
"""The study's MG-WFBP merges every tensor under this many elements into the next group (its optimizer's
`p[l] < 8192` rule)."""


def study_merge(deltas: list[float], numels: list[int], alpha: float, beta: float) -> list[list[int]]:
    """The authors' MG-WFBP grouping (Shi et al., their optimizer's _generate_groups_mgwfbp; re-expressed
    here): tensors in gradient-ready order with the backward time before each (`deltas`); a tensor's
    all-reduce costs alpha + beta * bytes. Walking backward, a tensor joins the next (later-ready) one's
    group when that one is ready before this one's all-reduce would finish and either before it would
    start or within alpha of it, and always when it has fewer than SMALL_ELEMENTS elements. Returns groups
    of positions in ready order."""
    L = len(numels)
    if L == 0:
        return []
    # the authors index layers in forward order: position l = L-1-j for the j-th ready tensor
    p = [numels[L - 1 - l] for l in range(L)]
    tb = [deltas[L - 1 - l] for l in range(L)]
    tc = [alpha + beta * n * ELEM_BYTES if n else 0.0 for n in p]
    taob = [0.0] * L
    for l in range(L - 2, -1, -1):
        taob[l] = taob[l + 1] + tb[l + 1]

    def merge(l: int) -> None:
        tc[l] = 0.0
        p[l - 1] += p[l]
        p[l] = 0
        tc[l - 1] = alpha + beta * p[l - 1] * ELEM_BYTES

    # taoc[l], when tensor l's all-reduce may start, depends only on the tensors after it: walking down, it
    # is the previous one's start plus its (possibly merged) cost, or l's own readiness; a merge at l changes
    # only what lies below l, so one pass gives what recomputing every start after each merge would
    taoc = taob[L - 1] + tb[L - 1]
    groups, group = [], []
    for l in range(L - 1, 0, -1):
        group.append(l)
        next_ready = taob[l - 1] + tb[l - 1]
        merged = False
        if next_ready < taoc + tc[l] and (taoc > next_ready or next_ready - taoc < alpha):
            merge(l)
            merged = True
        if not merged and p[l] < SMALL_ELEMENTS:
            merge(l)
            merged = True
        if not merged:
            groups.append(group)
            group = []
        taoc = max(taoc + tc[l], next_ready)
    groups.append([*group, 0])
    return [[L - 1 - l for l in g] for g in groups]
