"""What the software that runs a schedule does and costs beyond the links (docs/ARCHITECTURE.md, "Predictor").

`Stack()` (all zero) is ddlbench's own schemes on torch.distributed, as the harness runs them: a collective
is issued from a gradient hook and costs its all-reduce, nothing more. The study's frameworks set theirs
(harness/predict/study_cluster.py, every value an Input with its source):

- Horovod (the all-reduce methods, `horovod_*` fields): a background loop that, every cycle, negotiates which
  tensors every rank has ready (with the response cache off, a coordinator round of four small MPI
  collectives; with it on, one bit-vector all-reduce), then issues their collectives; with cycle time 0 the
  rounds run back to back, so a tensor is issued at the end of the first round that began after it was
  ready; with a cycle time (ByteScheduler's Horovod, 5 ms) at the cycle's tick, fused up to `fusion_bytes`.
- the Python side of a data-parallel optimizer: a hook per gradient on the training thread (`hook_s`), a
  device copy into a merged buffer (`copy_bytes_per_s`, `copy_launch_s`);
- ByteScheduler: the scheduler thread's CPU per partition, the poller thread's optimizer step per parameter;
- BytePS (`byteps`): its pipeline per partition (harness/sim/byteps.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class BytePSCosts:
    """BytePS's worker pipeline and server, per partition (byteps/common/core_loops.cc, server/server.cc)."""

    signal_s: float = 0.0
    """Local coordination per partition per stage (a Unix-socket message between a node's processes)."""
    nccl_call_s: float = 0.0
    """Issuing one NCCL reduce-scatter or all-gather of a partition (the launch; its transfer is the link's)."""
    copy_bytes_per_s: float = math.inf
    """Each GPU's pinned copy to and from host memory (COPYD2H, COPYH2D), bytes/s."""
    sum_bytes_per_s: float = math.inf
    """A server's summation rate, bytes of pushes summed per second (its engine threads together)."""
    recv_s: float = 0.0
    """A server's handling of one received push or pull request, under its one receive lock."""
    message_s: float = 0.0
    """Host CPU per message on the worker's side of the van (4 per partition: push, ack, pull, response)."""
    stream_bytes_per_s: float = math.inf
    """One worker-server connection's rate (one TCP stream on the ZMQ van; the link's own on RDMA)."""
    host_bytes_per_s: float = math.inf
    """The PCIe path between a node's GPUs and NIC and its host memory, per direction: without peer-to-peer
    and GPUDirect RDMA every stage of a partition crosses it (inf: not a bottleneck)."""


@dataclass(frozen=True)
class Stack:
    launch_s: float = 0.0
    """Host time to issue one collective (the framework's call and NCCL's enqueue), one after another."""
    negotiation_s: float = 0.0
    """Horovod, response cache off, cycle time 0: one coordinator round; 0 = no negotiation."""
    cycle_s: float = 0.0
    """Horovod's cycle time with the cache on (ByteScheduler's Horovod): collectives are issued at ticks."""
    cycle_sync_s: float = 0.0
    """Per tick with the cache on: the bit-vector all-reduce before the tick's collectives."""
    fusion_bytes: float = 0.0
    """Horovod's fusion buffer: collectives issued at one tick are fused up to this many bytes (0 = none)."""
    hook_s: float = 0.0
    """Python time per gradient hook on the training thread (the optimizer's allreduce_async_ call)."""
    copy_bytes_per_s: float = math.inf
    """Device memory copy rate into (and out of) a merged or fusion buffer, bytes/s."""
    copy_launch_s: float = 0.0
    """One such copy's launch."""
    partition_cpu_s: float = 0.0
    """ByteScheduler: its scheduler thread's CPU per partition it dispatches."""
    param_step_s: float = 0.0
    """ByteScheduler: its poller thread's optimizer step per parameter (Python, one after another)."""
    poller_holds_gil_s: float = 0.0
    """ByteScheduler's PyTorch plugin: its poller thread spins in Python over the Horovod handles in flight,
    holding the GIL (horovod 0.19's poll keeps it), so the training thread's next forward, which gives the
    GIL up at every operator call, advances one operator per switch interval: it waits, in effect, until the
    round's all-reduces are done, then this long (half a switch interval) to get the GIL back. 0 = no such
    thread (ddlbench's engine, or no Python poller)."""
    byteps: BytePSCosts | None = None
    """BytePS's pipeline, for the parameter-server methods the study ran on it; None = ddlbench's own
    parameter servers (harness/sim/ps.py)."""
    consensus: bool = True
    """ByteScheduler: ranks agree on readiness before each dispatch (ddlbench's engine: a small MIN
    all-reduce); False: rank 0 alone schedules and the others follow Horovod's negotiation (the library)."""
    credit_overshoot: bool = False
    """ByteScheduler: dispatch while any credit is left, overshooting it (the library's bytecore loop);
    False: stop at the first partition that does not fit (ddlbench's engine)."""
    mgwfbp_rule: str = "ddlbench"
    """MG-WFBP's merge rule: ddlbench's merge_plan, or `study`: the authors' recurrence (their optimizer's
    _generate_groups_mgwfbp: merge while the next gradient is ready before the group's all-reduce would
    start, or waits less than alpha; every tensor under 8192 elements merged)."""

    def copy_s(self, nbytes: float) -> float:
        """One device copy of `nbytes`."""
        return self.copy_launch_s + (nbytes / self.copy_bytes_per_s if nbytes else 0.0)


PLAIN = Stack()
"""ddlbench's own schemes: nothing beyond the links."""


def hooked_ready(c, stack: Stack, merged: list[bool]) -> tuple[list[float], float]:
    """(ready time of each gradient, end of backward) with the stack's work on the way: a Python hook per
    gradient on the training thread, and a device copy into its bucket's merged buffer where it has one
    (the study's fused BSP and MG-WFBP buffers); both delay every later gradient. Plain: as profiled."""
    if not stack.hook_s and stack.copy_bytes_per_s == math.inf and not stack.copy_launch_s:
        return list(c.ready_s), c.backward_total_s
    extra, ready = 0.0, list(c.ready_s)
    for i in c.ready_order:
        extra += stack.hook_s + (stack.copy_s(c.grad_bytes[i]) if merged[i] else 0.0)
        ready[i] = c.ready_s[i] + extra
    return ready, c.backward_total_s + extra
