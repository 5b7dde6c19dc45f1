"""The 2019 ByteScheduler library's PyTorch plugin on Horovod, as the study ran ByteScheduler-A2A
(bytescheduler/pytorch/horovod.py, common/bytecore.py, pytorch/horovod_task.py; docs/ARCHITECTURE.md,
"Predictor"): ddlbench's engine simulation (harness/sim/bytescheduler_engine.py: partitions, priorities, credit,
Horovod's cycle under it) with the plugin's Python threads and who schedules.

- Only rank 0 schedules (`self._immediate = rank != 0`): on every other rank the gradient hook partitions the
  tensor and hands each partition to Horovod at once (`immediate_do` -> allreduce_async_), and Horovod there
  waits for the gradient's ready event before it may all-reduce (the plugin's Horovod patch keeps that check
  off only on rank 0). A partition is all-reduced at the first Horovod tick after rank 0 has dispatched it
  *and* the other ranks' hooks have handed it over (`Round.handed`).
- Every rank's poller thread spins over its in-flight handles keeping the GIL (harness/study/gil.py). The other
  ranks' hooks run on the autograd thread and need the GIL: while the poller spins, a hooked layer waits for a
  handle to finish or the switch interval, `gil_waits_per_hook` times (the hand-off is a race the poller wins or
  loses: scripts/reference/gil_handoff.py times it on torch's own autograd engine), and the autograd thread
  launches nothing meanwhile, so the GPU's backward runs only as far as the hooks have let it (`backward`). Rank 0 hooks
  fast (its queue holds ready events polled through ctypes, which give the GIL up at every poll: `gil_release_s`).
- The poller finishes each handle in Python (`done_py_s`), then, once all of a parameter's partitions are done,
  steps that parameter with its own `_sgd`/`_adam` - which first walks the parameter list comparing names until
  it meets the parameter (`param_scan_s` per step) - and its optimizer's torch ops one by one (`py_op_s`), then
  releases the parameter's lock. The forward of the next iteration waits at each layer for those locks and
  needs the GIL for each of its torch calls (`fwd_gil_per_layer`), so it crawls while the poller spins; with
  `fwd_gap_s` each forward layer is launched only after the device has finished the one before, that long later
  (the forward serialised with the host; calibrated from one node: harness/study/calibration.py).
- Each benchmark step ends with torch.cuda.synchronize() (ddl-benchmarks/bytescheduler/imagenet_benchmark.py):
  the next forward starts once the GPU has finished the backward.
Iteration time: from one synchronize to the next, in the steady state (round 0 was sent as every later one).
"""

from __future__ import annotations

from harness.sim.bucketed import allreduce
from harness.sim.bytescheduler_engine import ByteSchedulerRun, Round
from harness.sim.costs import OPTIMIZERS
from harness.sim.des import Event
from harness.sim.model import ELEM_BYTES
from harness.study.gil import Spinner


class PluginRun(ByteSchedulerRun):
    def __init__(self, c, cluster, knobs, use_ps, p2p=None):
        super().__init__(c, cluster, knobs, use_ps, p2p)
        st = self.stack
        self.spin = Spinner(self.sim, st.gil_forced_s, st.gil_release_s)
        opt = st.optimizer_for(c.sample_unit) or "sgd"
        ops, self.passes = OPTIMIZERS[opt]
        # the poller's Python per parameter step beyond the name search: the optimizer's ops, then
        # _zero_one_grad's detach_ and zero_
        self.step_py_s = st.param_step_s + (ops + 2) * st.py_op_s
        self.gpu = 0.0  # when the GPU has done what is queued on it
        self.layer_of = {i: j for j, members in enumerate(c.layers) for i in members}
        self.hooks_waited = 0

    # --- a partition reaches Horovod once rank 0 dispatched it and the other ranks handed it over ---------------
    def send(self, k: int, r: Round):
        if self.workers <= 1:
            return super().send(k, r)
        ev = Event(self.sim)

        def both():
            if not self.ticks:  # a Horovod without a cycle time issues it at once
                allreduce(self.chan, self.ab, self.part_bytes[k]).on_fire(ev.fire)
                return
            self.pending.append((self.part_bytes[k], ev))
            self.tick_news = self.tick_news.told()

        r.handed[k].on_fire(both)
        return ev, ev

    # --- the poller: each finished handle, then each finished parameter's step ------------------------------------
    def watch_updates(self, r: Round) -> None:
        c, sim, st = self.c, self.sim, self.stack
        r.updated = [Event(sim) for _ in c.numels]
        for i, parts in enumerate(self.parts_of):
            left = [len(parts)]
            device = self.passes * ELEM_BYTES * c.numels[i] / st.opt_bytes_per_s  # its update kernels

            def one(i=i, left=left, device=device):
                at = self.poller.reserve(st.done_py_s)
                sim.at(at - sim.now, self.spin.finish)
                left[0] -= 1
                if left[0] == 0:
                    at = self.poller.reserve(self.step_py_s + (i + 1) * st.param_scan_s + device)
                    sim.at(at - sim.now, r.updated[i].fire)

            for k in parts:
                r.done[k].on_fire(one)
            if not parts:
                r.updated[i].fire()

    # --- the other ranks' autograd thread: a hook per gradient, each needing the GIL ----------------------------
    def backward(self, r: Round):
        """Generator: the backward on a rank other than 0 from now (its CPU side) and self.gpu (its GPU side);
        hands each gradient's partitions to Horovod from the hook. Leaves self.gpu at the backward's end."""
        c, sim, st = self.c, self.sim, self.stack
        deltas = c.backward_deltas()
        owed, last = 0.0, None
        for pos, i in enumerate(c.ready_order):
            self.gpu = max(self.gpu, sim.now) + deltas[pos]  # launched now, run after what is queued
            ready = self.gpu
            if self.layer_of[i] != last:  # a layer's AccumulateGrad nodes and their hooks run back to back
                last = self.layer_of[i]
                owed += st.gil_waits_per_hook
                waited = self.spin.waits
                while owed >= 1.0:  # the hook (and the engine) need the GIL
                    owed -= 1.0
                    yield from self.spin.acquire()
                self.hooks_waited += self.spin.waits - waited
            parts = self.parts_of[i]
            yield st.hook_s + st.task_py_s * len(parts)
            self.spin.add(len(parts))
            for k in parts:  # Horovod on this rank all-reduces a partition once its gradient is computed
                sim.at(max(0.0, ready - sim.now), r.handed[k].fire)
        self.gpu = max(self.gpu, sim.now)

    def leader_marks(self, r: Round, start: float) -> None:
        """Rank 0's backward from `start` on its GPU: its hooks hold nothing up (ready events polled through
        ctypes give the GIL up), each partition ready for its scheduler once its gradient is and its hook ran."""
        c, sim, st = self.c, self.sim, self.stack
        for i in range(len(c.numels)):
            at = (
                start
                + min(c.ready_s[i], c.backward_total_s)
                + st.gil_release_s
                + st.hook_s
                + st.task_py_s * len(self.parts_of[i])
            )
            sim.at(max(0.0, at - sim.now), r.mark, self.parts_of[i])

    def main(self):
        c, sim, st, marks = self.c, self.sim, self.stack, self.marks
        prev = None
        per_layer = st.fwd_gil_per_layer
        owed = 0.0
        for it in range(2):
            marks[f"start{it}"] = sim.now
            gpu0 = max(self.gpu, sim.now)
            for j, members in enumerate(c.layers):
                if prev is not None:
                    yield [prev.updated[i] for i in members]  # the pre-forward hook takes its parameters' locks
                owed += per_layer
                while owed >= 1.0:  # the layer's torch calls, each needing the GIL
                    owed -= 1.0
                    yield from self.spin.acquire()
                if st.fwd_gap_s:  # launched once the device is done, from Python
                    yield max(0.0, self.gpu - sim.now) + st.fwd_gap_s
                self.gpu = max(self.gpu, sim.now) + c.layer_forward_s[j]
            marks["fwd"] = self.gpu - gpu0
            r = Round(sim, len(self.parts))
            r.handed = [Event(sim) for _ in self.parts]
            self.watch_updates(r)
            sim.process(self.scheduler(r))
            bwd0 = self.gpu
            marks[f"bwd{it}"] = bwd0
            self.leader_marks(r, bwd0)
            yield from self.backward(r)
            marks["bwd"] = self.gpu - bwd0
            yield max(0.0, self.gpu - sim.now)  # torch.cuda.synchronize()
            marks[f"end{it}"] = sim.now
            prev = r

    def plan_extra(self) -> dict:
        return {
            **super().plan_extra(),
            "library": "bytescheduler-0.1 (PyTorch plugin, Horovod)",
            "gil_waits": self.spin.waits,
            "gil_waited_s": self.spin.waited_s,
            "hooks_waited": self.hooks_waited,
        }
