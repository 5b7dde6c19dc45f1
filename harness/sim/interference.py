"""Communication and compute sharing one GPU (docs/ARCHITECTURE.md, "Predictor"): on GeForce cards without
peer-to-peer, NCCL's shared-memory kernels and BytePS's copies run on the same GPU, memory and PCIe path as the
backward's kernels, so neither runs at its own speed while they overlap (`Stack.overlap_compute_slowdown`,
`Stack.overlap_comm_slowdown`, ranges and sources in harness/study/inputs.py).

The pass runs a model twice. The first run, as usual, logs when the GPU-side communication ran (`gpu_comm_facts`:
how long it overlapped the backward, how long it ran in all). The second runs the same model on a backward
stretched by the compute slowdown over the overlapped share of the backward, and with every collective and
copy slowed by the communication slowdown over the overlapped share of the communication (`Stack.comm_scale`):
a first-order account of a processor shared while both run, whose overlap the second run may itself move a
little. With neither slowdown set (ddlbench's own stacks) the model runs once, as it always did.
"""

from __future__ import annotations

from dataclasses import replace

from harness.sim.des import busy_within


def gpu_comm_facts(fifos, bwd_start: float, bwd_end: float) -> dict:
    """The plan facts the second run is sized by: how long the GPU-side communication (`fifos`, logging)
    overlapped the backward [bwd_start, bwd_end], and how long it ran in all."""
    inside, total = busy_within(fifos, bwd_start, bwd_end)
    return {"gpu_comm_overlap_s": inside, "gpu_comm_busy_s": total}


def contended(run, c, cluster, *args):
    """`run(c, cluster, *args) -> Outcome`, with compute and communication slowing each other where they
    overlap on the GPU (see the module docstring); plan facts say by how much."""
    st = cluster.stack
    first = run(c, cluster, *args)
    overlap, busy = first.plan.get("gpu_comm_overlap_s", 0.0), first.plan.get("gpu_comm_busy_s", 0.0)
    if not st.contended or overlap <= 0.0 or c.backward_total_s <= 0.0:
        return first
    stretch = 1.0 + st.overlap_compute_slowdown * min(1.0, overlap / c.backward_total_s)
    scale = 1.0 + st.overlap_comm_slowdown * (overlap / busy if busy else 0.0)
    second = run(c.scaled_backward(stretch), cluster.with_(stack=replace(st, comm_scale=scale)), *args)
    second.plan.update(overlap_compute_stretch=stretch, overlap_comm_scale=scale)
    return second
