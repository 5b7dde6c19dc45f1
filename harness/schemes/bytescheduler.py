"""The engine behind ByteScheduler (Peng et al., SOSP 2019) on all-reduce and on parameter servers.

Gradients are cut into partitions (default 4 MB) with the priority of their layer (layers near the
input first: the next forward needs them first). A scheduler thread sends the most urgent *ready*
partitions while the bytes in flight stay under the credit window (default 16 MB; on PS the credit covers pushes in
flight, since a pull also waits for the other workers' pushes). Nothing waits
before the optimizer: each layer's update is applied in its forward pre-hook of the next iteration,
after waiting for just that layer's partitions, so communication also overlaps the next forward.

All-reduce needs every rank to issue the same collectives in the same order, but readiness is local.
Like Horovod's coordinator, the scheduler first agrees with the other ranks on which partitions are
ready everywhere (a tiny MIN all-reduce of a readiness mask) and only dispatches those; every branch it
takes depends only on agreed state, so ranks stay in lock-step. Push-pull needs no agreement.
"""

from __future__ import annotations

import collections
import os
import queue
import threading
import time

import torch

from harness.grouping.rules import partition
from harness.measure.collective import probe_gradient_sync
from harness.schemes.base import Scheme

MB = 1 << 20
TRACE_VAR = "DDLBENCH_BS_TRACE"
"""=1: record each partition's send and finish times in the plan (`partition_trace`): the credit check."""
TRACE_MAX = 20000


class _Round:
    def __init__(self, n_parts: int):
        self.ready = [0] * n_parts
        self.done = [threading.Event() for _ in range(n_parts)]
        self.dispatched_all = threading.Event()


class ByteSchedulerEngine(Scheme):
    use_ps: bool = False

    def setup(self, model):
        model = super().setup(model)
        self.workers = self.ctx.workers
        for p in self.params:
            p.grad = torch.zeros_like(p)
        index = {id(p): i for i, p in enumerate(self.params)}
        # Owner module of each parameter (first module that holds it directly) and one optimizer per
        # owner: SGD is element-wise, so per-layer instances with the same recipe equal one optimizer.
        self.owned: list[tuple[torch.nn.Module, list[int]]] = []
        seen = set()
        for mod in model.modules():
            mine = [index[id(p)] for p in mod.parameters(recurse=False) if id(p) in index and id(p) not in seen]
            if mine:
                seen.update(id(self.params[i]) for i in mine)
                self.owned.append((mod, mine))
        self.layer_opts = [self.ctx.make_optimizer([self.params[i] for i in mine]) for _, mine in self.owned]
        self.optimizer = None
        # Priority: parameter order, i.e. model definition order, input side first.
        elem = self.params[0].element_size() if self.params else 4
        self.parts = partition(
            [p.numel() for p in self.params], list(range(len(self.params))), elem, int(self.knobs.partition_mb * MB)
        )
        self.part_bytes = [pt.numel * elem for pt in self.parts]
        self.by_priority = sorted(range(len(self.parts)), key=lambda k: (self.parts[k].priority, k))
        self.parts_of = [[] for _ in self.params]
        for k, pt in enumerate(self.parts):
            self.parts_of[pt.param].append(k)
        self.credit = int(self.knobs.credit_mb * MB)
        if self.use_ps:
            self.ctx.transport.declare_keys([(pt.key, pt.numel) for pt in self.parts])
        for j, (mod, _) in enumerate(self.owned):
            mod.register_forward_pre_hook(self.pre_hook_applying(j))
        for i, p in enumerate(self.params):
            p.register_post_accumulate_grad_hook(self._make_grad_hook(i))
        self.round: _Round | None = None
        self.applied = [True] * len(self.owned)
        self.error: BaseException | None = None
        self.rounds: queue.Queue = queue.Queue()
        self.cond = threading.Condition()
        self.consensus_calls = 0
        # [partition, bytes, sent, finished] (perf_counter seconds; finished = credit returned or released)
        self._trace: list | None = [] if os.environ.get(TRACE_VAR) == "1" else None
        self._trace_open: dict[int, float] = {}
        self.thread = threading.Thread(target=self._scheduler, daemon=True, name="bytescheduler")
        self.thread.start()
        self.plan.update(
            partitions=len(self.parts),
            credit_mb=self.knobs.credit_mb,
            partition_mb=self.knobs.partition_mb,
            layers=len(self.owned),
        )
        return model

    # --- main thread ------------------------------------------------------------------------------
    def _make_grad_hook(self, i: int):
        def hook(_p):
            r = self.round
            with self.cond:
                for k in self.parts_of[i]:
                    r.ready[k] = 1
                self.cond.notify()

        return hook

    def _apply(self, j: int) -> None:
        """Wait for layer j's partitions of the last round, average, update, zero its gradients."""
        r = self.round
        mine = self.owned[j][1]
        keys = [k for i in mine for k in self.parts_of[i]]
        if not all(r.done[k].is_set() for k in keys):
            with self.forward_wait():  # billed to forward_wait_s (docs/ARCHITECTURE.md, "Timing loop")
                for k in keys:
                    while not r.done[k].wait(timeout=1.0):
                        self._check()
        self._check()
        for i in mine:
            self.params[i].grad.div_(self.workers)
        self.layer_opts[j].step()
        self.layer_opts[j].zero_grad(set_to_none=False)  # in place: partitions are views of the gradients
        self.applied[j] = True

    def _check(self) -> None:
        if self.error is not None:
            raise RuntimeError(f"bytescheduler thread failed: {self.error!r}") from self.error

    def before_backward(self) -> None:
        for j, done in enumerate(self.applied):  # layers not called in forward (none in our models)
            if not done:
                self._apply(j)
        self.round = _Round(len(self.parts))
        self.applied = [False] * len(self.owned)
        self.rounds.put(self.round)

    def after_backward(self) -> None:
        with self.cond:  # gradients of unused parameters are zero and ready too
            self.round.ready[:] = [1] * len(self.round.ready)
            self.cond.notify()

    def step(self) -> None:
        pass  # updates happen layer by layer in the next forward

    def quiesce(self) -> None:
        """Block until this round's collectives are all issued (before the main thread issues any)."""
        if self.round is not None:
            while not self.round.dispatched_all.wait(timeout=1.0):
                self._check()

    def flush(self) -> None:
        for j, done in enumerate(self.applied):
            if not done:
                self._apply(j)

    # --- scheduler thread -------------------------------------------------------------------------
    def _scheduler(self) -> None:
        try:
            while True:
                r = self.rounds.get()
                if r is None:
                    return
                self._run_round(r)
        except BaseException as e:  # the main thread re-raises it; the cell fails instead of hanging
            self.error = e

    def _run_round(self, r: _Round) -> None:  # noqa: C901 - read beside its simulation, sim/bytescheduler_engine.py
        t = self.ctx.transport
        consensus = not self.use_ps and self.workers > 1
        pending = list(self.by_priority)
        agreed = [0] * len(self.parts)
        inflight: collections.deque = collections.deque()
        pulling: list = []  # PS: pushed (credit returned), pull outstanding
        in_bytes = 0
        while pending:
            with self.cond:
                # Wait for news only when nothing agreed-ready is left to send (a global condition).
                if not any(agreed[k] for k in pending):
                    while not any(r.ready[k] and not agreed[k] for k in pending):
                        self.cond.wait()
                snapshot = list(r.ready)
            if consensus:
                mask = torch.tensor(snapshot, dtype=torch.uint8)
                t.allreduce_min_(mask)
                snapshot = mask.tolist()
                self.consensus_calls += 1
            agreed = snapshot
            sent = []
            for k in pending:  # most urgent first; stop at the first that the credit cannot take
                if not agreed[k]:
                    continue
                if inflight and in_bytes + self.part_bytes[k] > self.credit:
                    break
                self._trace_start(k)
                inflight.append((k, self._send(k)))
                in_bytes += self.part_bytes[k]
                sent.append(k)
            sent_set = set(sent)
            pending = [k for k in pending if k not in sent_set]
            if pending and any(agreed[k] for k in pending) and inflight:
                k, h = inflight.popleft()  # credit is exhausted: free the oldest
                h.wait_sent()
                self._trace_end(k)
                in_bytes -= self.part_bytes[k]
                if self.use_ps:
                    pulling.append((k, h))
                else:
                    r.done[k].set()
        r.dispatched_all.set()
        # Release the rest most urgent first: the next forward needs the input layers first.
        for k, h in sorted(list(pulling) + list(inflight), key=lambda kh: self.parts[kh[0]].priority):
            # done means finished: on NCCL wait() alone only orders the *current* stream (shared with the
            # main thread's forward) behind the collective, so first ask the operation (wait_sent polls)
            h.wait_sent()
            h.wait()
            self._trace_end(k)
            r.done[k].set()

    def _send(self, k: int):
        pt = self.parts[k]
        view = self.params[pt.param].grad.view(-1)[pt.offset : pt.offset + pt.numel]
        t = self.ctx.transport
        if self.use_ps:
            return t.push_pull_async(view, pt.key, pt.priority)
        return t.allreduce_async(view, pt.key, pt.priority)

    def describe(self) -> dict:
        trace = {} if self._trace is None else {"partition_trace": list(self._trace)}
        return {**self.plan, "consensus_calls": self.consensus_calls, **trace}

    def probe_comm(self, reps: int = 3) -> float:
        self.quiesce()
        keys = [(pt.key, pt.numel) for pt in self.parts] if self.use_ps else None
        return probe_gradient_sync(self.ctx.transport, self.ctx.device, sum(pt.numel for pt in self.parts), keys, reps)

    # --- partition trace (DDLBENCH_BS_TRACE=1): when each partition was sent and seen finished ------
    def _trace_start(self, k: int) -> None:
        if self._trace is not None:
            self._trace_open[k] = time.perf_counter()

    def _trace_end(self, k: int) -> None:
        if self._trace is not None and k in self._trace_open:
            self._trace.append([k, self.part_bytes[k], self._trace_open.pop(k), time.perf_counter()])
            del self._trace[:-TRACE_MAX]

    def shutdown(self) -> None:
        self.rounds.put(None)
