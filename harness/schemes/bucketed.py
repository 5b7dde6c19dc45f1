"""The engine behind BSP, WFBP and MG-WFBP, on all-reduce or on parameter servers.

Gradients are grouped into buckets issued in a fixed order. With `overlap`, a bucket's communication
starts from the gradient hooks as soon as all of its tensors are ready and every earlier bucket has been
issued (collectives must be issued in the same order on every rank, as DDP's reducer also ensures);
without it (BSP) everything is issued after backward. The first `profile_iters` iterations run BSP while
recording when each gradient becomes ready; rank 0's observed order and timings then define the buckets
for every rank (`plan_buckets`), so ranks never disagree.
"""

from __future__ import annotations

import statistics

import torch

from harness.grouping.rules import partition
from harness.measure.collective import probe_gradient_sync
from harness.measure.timer import make_clock
from harness.schemes.base import Scheme

MB = 1 << 20


class BucketSync(Scheme):
    overlap: bool = True
    use_ps: bool = False
    profile_iters: int = 2

    # --- planning (subclasses) ------------------------------------------------------------------
    def plan_buckets(self, order: list[int], backward_s: list[float]) -> list[list[int]]:
        """Buckets (lists of parameter indices) in issue order, from the ready order and the time
        each gradient took to become ready after the previous one."""
        return [[i] for i in order]

    # --- set-up -----------------------------------------------------------------------------------
    def setup(self, model):
        model = super().setup(model)
        self.n = len(self.params)
        self.workers = self.ctx.workers
        for p in self.params:  # gradients live in place from now on (hooks and views rely on it)
            p.grad = torch.zeros_like(p)
        self.iteration = 0
        self.profiling = self.overlap and self.profile_iters > 0
        self._skip_wait = False  # a profiling iteration already synchronised everything after backward
        self._ready_at: list[list[float]] = []
        # marks of the profile: CUDA events in the gradient hooks on GPU (a hook fires when the kernel is
        # queued, so perf_counter there would time CPU launch gaps), perf_counter on CPU
        self._clock = make_clock(self.ctx.device)
        self._order: list[int] = []
        default_order = list(reversed(range(self.n)))  # backward visits layers roughly in reverse
        self._set_buckets(self.plan_buckets(default_order, [0.0] * self.n) if self.overlap else [list(range(self.n))])
        if self.use_ps:
            elem = self.params[0].element_size() if self.params else 4
            self.parts = partition(
                [p.numel() for p in self.params], list(range(self.n)), elem, int(self.knobs.partition_mb * MB)
            )
            self.parts_of = [[] for _ in range(self.n)]
            for part in self.parts:
                self.parts_of[part.param].append(part)
            placement = self.ctx.transport.declare_keys([(pt.key, pt.numel) for pt in self.parts])
            self.plan.update(
                partitions=len(self.parts),
                servers=self.ctx.transport.servers,
                server_bytes=self._server_bytes(placement),
            )
        if self.overlap:
            for i, p in enumerate(self.params):
                p.register_post_accumulate_grad_hook(self._make_hook(i))
        return model

    def _server_bytes(self, placement: dict) -> list[int]:
        out = [0] * self.ctx.transport.servers
        for pt in self.parts:
            out[placement[pt.key]] += pt.numel * self.params[pt.param].element_size()
        return out

    def _set_buckets(self, buckets: list[list[int]]) -> None:
        self.buckets = buckets
        self.bucket_of = {}
        for b, members in enumerate(buckets):
            for i in members:
                self.bucket_of[i] = b
        self.flat = [
            None
            if len(m) == 1
            else torch.zeros(
                sum(self.params[i].numel() for i in m), device=self.ctx.device, dtype=self.params[m[0]].dtype
            )
            for m in buckets
        ]
        self.plan.update(buckets=len(buckets), tensors=self.n)

    # --- per iteration --------------------------------------------------------------------------
    def before_backward(self) -> None:
        self._missing = [len(m) for m in self.buckets]
        self._next = 0  # next bucket to issue (all-reduce: the issue order is fixed)
        self._issued = [False] * len(self.buckets)
        self._handles: list = [None] * len(self.buckets)
        self._t0 = self._clock.mark() if self.profiling else None
        self._seen: list = [None] * self.n
        self._order = []

    def _make_hook(self, i: int):
        def hook(_param):
            if self.profiling:
                self._seen[i] = self._clock.mark()
                self._order.append(i)
                return
            b = self.bucket_of[i]
            self._missing[b] -= 1
            if self.use_ps:  # point-to-point pushes need no common order: send as soon as ready
                if self._missing[b] == 0:
                    self._issue(b)
                return
            while self._next < len(self.buckets) and self._missing[self._next] == 0:
                self._issue(self._next)
                self._next += 1

        return hook

    def after_backward(self) -> None:
        if self.profiling:
            self._ready_at.append(self._ready_times())
            self._bsp()
            return
        for b in range(len(self.buckets)):  # BSP, and tensors whose hooks did not fire (unused)
            if not self._issued[b]:
                self._issue(b)

    def _ready_times(self) -> list[float]:
        """Seconds from the start of backward until each gradient was ready (0 for unused ones)."""
        end = self._clock.mark()
        self._clock.sync(end)  # profiling iterations are not measured: one synchronisation is free
        return [0.0 if m is None else max(0.0, self._clock.elapsed(self._t0, m)) for m in self._seen]

    def _bsp(self) -> None:
        """Profiling iterations synchronise everything after backward in one go (correct training)."""
        saved = self.buckets, self.bucket_of, self.flat
        self._set_buckets([list(range(self.n))])
        self._handles, self._issued = [None], [False]
        self._issue(0)
        for h in self._handles[0]:
            h.wait()
        self._finish(0)
        self._handles = [None]
        self.buckets, self.bucket_of, self.flat = saved
        self._skip_wait = True

    def _issue(self, b: int) -> None:
        self._issued[b] = True
        members = self.buckets[b]
        t = self.ctx.transport
        if self.use_ps:
            hs = []
            for i in members:
                g = self.grad_of(self.params[i]).view(-1)
                for pt in self.parts_of[i]:
                    hs.append(t.push_pull_async(g[pt.offset : pt.offset + pt.numel], pt.key, pt.priority))
            self._handles[b] = hs
            return
        flat = self.flat[b]
        if flat is None:
            tensor = self.grad_of(self.params[members[0]])
        else:
            torch.cat([self.grad_of(self.params[i]).view(-1) for i in members], out=flat)
            tensor = flat
        self._handles[b] = [t.allreduce_async(tensor, f"bucket{b}", priority=b)]

    def _finish(self, b: int) -> None:
        members = self.buckets[b]
        flat = self.flat[b]
        if flat is None or self.use_ps:
            for i in members:
                self.params[i].grad.div_(self.workers)
            return
        flat.div_(self.workers)
        off = 0
        for i in members:
            p = self.params[i]
            p.grad.view(-1).copy_(flat[off : off + p.numel()])
            off += p.numel()

    def wait(self) -> None:
        if self._skip_wait:
            self._skip_wait = False
            return
        for b, hs in enumerate(self._handles):
            for h in hs:
                h.wait()
            self._finish(b)

    def step(self) -> None:
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=False)  # in place: the hooks and flat buckets use these tensors
        self.iteration += 1
        if self.profiling and self.iteration >= self.profile_iters:
            self._end_profile()

    def _end_profile(self) -> None:
        """Rank 0's observed ready order and per-gradient times define everyone's buckets."""
        self.profiling = False
        runs = self._ready_at[1:] or self._ready_at  # the first backward carries one-off costs
        ready = [statistics.median(r[i] for r in runs) for i in range(self.n)]
        order = sorted(range(self.n), key=lambda i: ready[i])
        backward_s, prev = [], 0.0
        for i in order:
            backward_s.append(max(0.0, ready[i] - prev))
            prev = ready[i]
        order, backward_s = self.ctx.transport.broadcast_object((order, backward_s), src=0)
        self._set_buckets(self.plan_buckets(order, backward_s))
        self.plan.update(backward_s_total=sum(backward_s))

    # --- probe --------------------------------------------------------------------------------------
    def probe_comm(self, reps: int = 3) -> float:
        keys = [(pt.key, pt.numel) for pt in self.parts] if self.use_ps else None
        return probe_gradient_sync(self.ctx.transport, self.ctx.device, sum(p.numel() for p in self.params), keys, reps)
