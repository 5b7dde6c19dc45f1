"""What the software that runs a schedule does and costs beyond the links (docs/ARCHITECTURE.md, "Predictor").

`Stack()` (all zero) is ddlbench's own schemes on torch.distributed, as the harness runs them: a collective
is issued from a gradient hook and costs its all-reduce, nothing more. The study's frameworks set theirs
(harness/study/cluster.py, every value an Input with its source):

- Horovod (the all-reduce methods, `horovod_*` fields): a background loop that, every cycle, negotiates which
  tensors every rank has ready (with the response cache off, a coordinator round of four small MPI
  collectives; with it on, one bit-vector all-reduce), then issues their collectives; with cycle time 0 the
  rounds run back to back, so a tensor is issued at the end of the first round that began after it was
  ready; with a cycle time (ByteScheduler's Horovod, 5 ms) at the cycle's tick, fused up to `fusion_bytes`.
- the Python side of a data-parallel optimizer: a hook per gradient on the training thread (`hook_s`), a
  device copy into a merged buffer (`copy_bytes_per_s`, `copy_launch_s`);
- ByteScheduler: the scheduler thread's CPU per partition, the poller thread's optimizer step per parameter,
  and its Python threads sharing the GIL (`gil_*`, harness/study/gil.py);
- BytePS (`byteps`): its pipeline per partition (harness/sim/byteps.py), its ZeroMQ van over TCP;
- the optimizer each framework's script ran (`optimizer`), as a roofline of its memory passes and Python ops;
- communication and compute sharing a GPU without peer-to-peer (`overlap_*`): both slower while they overlap
  (harness/sim/interference.py).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace


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
    nic_bytes_per_s: float = 0.0
    """What a node's NIC carries for BytePS, all its worker-server connections together, bytes/s per
    direction (over IPoIB several TCP streams in parallel carry more than NCCL's one stream per ring edge);
    0 = the cluster's inter-node link rate."""
    nccl_edge_bytes_per_s: float = 0.0
    """One ring edge of BytePS's own in-node NCCL reduce-scatter and all-gather of a partition (through host
    memory without peer-to-peer), bytes/s; 0 = the cluster's intra-node link (Horovod's all-reduce edge). Its
    own figure because BytePS runs them partition by partition on its own stream and communicator, grouped
    (byteps/common/core_loops.cc), not as one all-reduce of the whole buffer."""
    van_bytes_per_s: float = math.inf
    """ps-lite's ZeroMQ van over TCP: one I/O thread per process writes every byte the process sends and reads
    every byte it receives, so a worker's pushes and pulls (a server's pushes in and pulls out) share this
    rate, whatever the link (inf: the RDMA van, no such thread)."""


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
    copy_back: bool = False
    """A merged buffer is copied back into its gradients after its collective, before the optimizer (ddlbench's own
    schemes, harness/schemes/bucketed.py `_finish`; DDP's reducer without gradient_as_bucket_view); False: the
    copy in only (the study's stacks, as calibrated)."""
    partition_cpu_s: float = 0.0
    """ByteScheduler: its scheduler thread's CPU per partition it dispatches."""
    param_step_s: float = 0.0
    """ByteScheduler: its poller thread's optimizer step per parameter (Python, one after another)."""
    gil_forced_s: float = 0.0
    """ByteScheduler's PyTorch plugin: its poller thread spins in Python over the Horovod handles in flight and
    keeps the GIL between polls (harness/study/gil.py); a thread that needs the GIL meanwhile waits for the poller
    to finish an item or empty its queue, at most this long (the switch interval and the hand-off of a forced
    switch). 0 = no spinning Python thread (ddlbench's engine)."""
    gil_release_s: float = 0.0
    """The wait for the GIL from a thread that gives it up at once (a hand-off)."""
    task_py_s: float = 0.0
    """ByteScheduler: Python on the gradient hook per partition (its task objects, the tensor slice, Horovod's
    allreduce_async_ and the queue put), on the autograd thread."""
    done_py_s: float = 0.0
    """ByteScheduler: the poller's Python per finished handle (synchronize, the callback, grad.set_)."""
    param_scan_s: float = 0.0
    """ByteScheduler: one step of its optimizer's search for a parameter (`_sgd`/`_adam` walk the parameter list
    comparing names until they meet it): parameter i costs i + 1 steps."""
    gil_waits_per_hook: float = 0.0
    """Times a hooked backward layer waits for the GIL while the poller spins (the autograd engine and the hook
    need it; each time the poller wins the race for it, the wait lasts until it gives it up)."""
    fwd_gap_s: float = 0.0
    """ByteScheduler's PyTorch plugin: host time between two forward layers when each layer is launched only after
    the device has finished the one before (the plugin's pre-forward hook takes the parameter's lock from Python
    before the layer runs): the forward serialised with the host. 0 = the forward's launches run ahead of the
    GPU, as torch's do without the plugin."""
    fwd_gil_per_layer: float = 0.0
    """Times the training thread waits for the GIL per forward layer while the poller spins (its torch calls
    each give the GIL up and need it back; the poller wins some of those races)."""
    leader_only: bool = False
    """ByteScheduler's PyTorch plugin: only rank 0 schedules; every other rank hands each partition to Horovod
    from its gradient hook (`immediate`), so a collective starts once rank 0 has scheduled it *and* the other
    ranks' hooks have run (they wait for the GIL: `gil_forced_s`)."""
    optimizer: tuple = ()
    """(sample unit, optimizer) pairs: the optimizer this framework's benchmark script ran per kind of workload
    (`sgd`, `adam`, `adamw`; OPTIMIZERS); () = as the compute model was profiled."""
    py_op_s: float = 0.0
    """One torch op called from Python on the GPU (dispatch and kernel launch): the optimizer's Python per op."""
    opt_bytes_per_s: float = math.inf
    """Device memory rate of the optimizer's elementwise kernels (bytes read and written per second)."""
    overlap_compute_slowdown: float = 0.0
    """Compute runs this much slower while a collective or a copy of the same GPU runs beside it (GeForce
    without peer-to-peer: NCCL's shared-memory kernels and the copies share the SMs, memory and PCIe path)."""
    overlap_comm_slowdown: float = 0.0
    """A collective or copy runs this much slower while compute runs beside it on the same GPU."""
    comm_scale: float = 1.0
    """Every collective and device copy of this iteration takes this many times its time alone (set by the
    interference pass, harness/sim/interference.py, from the share of them that overlapped compute)."""

    @property
    def contended(self) -> bool:
        """Whether communication and compute slow each other where they overlap (the models then log when
        their GPU-side communication runs: Outcome.plan `gpu_comm_overlap_s`, `gpu_comm_busy_s`)."""
        return bool(self.overlap_compute_slowdown or self.overlap_comm_slowdown)

    byteps: BytePSCosts | None = None
    """BytePS's pipeline, for the parameter-server methods the study ran on it; None = ddlbench's own
    parameter servers (harness/sim/ps.py)."""
    consensus: bool = True
    """ByteScheduler: ranks agree on readiness before each dispatch (ddlbench's engine: a small MIN
    all-reduce); False: rank 0 alone schedules and the others follow Horovod's negotiation (the library)."""
    credit_overshoot: bool = False
    """ByteScheduler: dispatch while any credit is left, overshooting it (the library's bytecore loop);
    False: stop at the first partition that does not fit (ddlbench's engine)."""
    mgwfbp_merge: Callable[[list, list, float, float], list] | None = None
    """MG-WFBP's merge rule: None = ddlbench's merge_plan (harness/grouping/rules.py); a framework's own rule
    as a function (backward deltas, numels in ready order, alpha, beta) -> groups of ready positions (the
    study's authors' recurrence: harness/study/mgwfbp.py)."""
    bytescheduler_run: type | None = None
    """ByteScheduler-A2A's run on this stack: None = ddlbench's own engine (harness/sim/bytescheduler_engine.py);
    a library's own (a subclass of its ByteSchedulerRun, e.g. the study's 2019 plugin on Horovod:
    harness/study/bytescheduler_plugin.py)."""

    def copy_s(self, nbytes: float) -> float:
        """One device copy of `nbytes`."""
        return self.copy_launch_s + (nbytes / self.copy_bytes_per_s if nbytes else 0.0)

    def optimizer_for(self, sample_unit: str) -> str | None:
        """The optimizer this stack's script ran on a workload of this sample unit (None: as profiled)."""
        return dict(self.optimizer).get(sample_unit)


PLAIN = Stack()
"""ddlbench's own schemes: nothing beyond the links."""


OPTIMIZERS = {
    # per parameter tensor: (torch ops called from Python, fp32 passes over memory: tensors read + written)
    "sgd": (1, 3),  # lr only (the study's scripts): p.add_(-lr, g) reads p and g, writes p
    "adam": (7, 19),  # torch.optim.Adam (PyTorch 1.4), no weight decay: m.mul_.add_ (2+3), v.mul_.addcmul_
    # (2+4), denom = v.sqrt().add_(eps) (2+2), p.addcdiv_(m, denom) (4)
    "adamw": (7, 19),  # transformers 2.x AdamW at weight decay 0 (its default): the same seven ops
}
"""What one optimizer step costs per parameter tensor, read off the optimizers' step() code."""


def optimizer_s(stack: Stack, name: str, numels, elem_bytes: int = 4) -> float:
    """One parameter group's optimizer step: its kernels' memory passes at the device's rate, or the Python
    that launches them one op at a time, whichever is longer."""
    ops, passes = OPTIMIZERS[name]
    device = passes * elem_bytes * sum(numels) / stack.opt_bytes_per_s
    return max(device, ops * len(numels) * stack.py_op_s)


def with_optimizer(c, stack: Stack):
    """The compute model `c` with the optimizer this stack's script ran on such a workload (Stack.optimizer),
    each layer's step from OPTIMIZERS; `c` itself where the stack names none."""
    name = stack.optimizer_for(c.sample_unit)
    if name is None:
        return c
    return replace(c, layer_optimizer_s=tuple(optimizer_s(stack, name, [c.numels[i] for i in m]) for m in c.layers))


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
