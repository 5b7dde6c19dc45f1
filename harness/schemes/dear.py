"""`dear` (decoupled all-reduce, Zhang, Shi, Chu, Wang, Li, Liu, ICDCS 2023, arXiv 2302.12445): each
bucket's all-reduce is split into its two halves, a reduce-scatter overlapped with backward and an
all-gather overlapped with the next iteration's forward.

- Buckets (tensor fusion): consecutive layers in forward order (a layer = the module that first holds
  parameters directly), joined while the bucket stays under `bucket_mb` (the paper's and its public
  code's default threshold: 25 MB), or `nearby_layers` layers per bucket (1 = no fusion). The rule is
  harness.sim.dear.dear_groups, shared with the simulation.
- Backward: each gradient is copied into its bucket's padded buffer as it becomes ready; a bucket's
  reduce-scatter starts once all its gradients are in and every later bucket has started (buckets go
  last layer first, the same order on every rank: collectives must match).
- After backward: wait for the reduce-scatters (the loop's comm wait), then start every bucket's
  all-gather in forward order and return; nothing else waits.
- Next forward: each layer's forward pre-hook waits only for its own bucket's all-gather, then copies
  its averaged gradients out and steps its own optimizer (the one SGD recipe per layer: element-wise,
  so per-layer instances equal one optimizer) before computing.

Optimizer: as in the paper's reference implementation (lzhangbv/dear_pytorch, dopt_rsag.py), the
all-gather gathers the reduced *gradient* shards and every rank updates all its parameters with the full
averaged gradient (not ZeRO's shard update followed by a parameter all-gather); the bytes moved equal
one all-reduce. Every rank gathers the same shards, so parameters stay bitwise identical across ranks.
The last iteration's update is applied by flush() at the end of the run.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import Annotated

import torch

from harness.grouping.cost import MB
from harness.schemes.base import Scheme, register
from harness.schemes.knobs import Grid, Knobs, Range
from harness.sim.dear import dear as dear_model
from harness.sim.dear import dear_groups
from harness.sim.layer_hooks import owners
from harness.sim.model import Model


@dataclass(frozen=True)
class DeARKnobs(Knobs):
    bucket_mb: Annotated[float, Range(gt=0), Grid(1, 5, 25, 100)] = 25.0
    """tensor fusion threshold, MB: consecutive layers share a bucket while it stays under it (DeAR's 25)"""
    nearby_layers: Annotated[int, Range(ge=0)] = 0
    """> 0: buckets of this many consecutive layers instead of the threshold (1 = no fusion); 0 = use bucket_mb"""


class DeAR(Scheme):
    def setup(self, model):
        model = super().setup(model)
        self.optimizer = None  # one optimizer per layer, stepped in the next forward
        self.workers = W = self.ctx.workers
        dev = self.ctx.device
        for p in self.params:  # gradients live in place from now on
            p.grad = torch.zeros_like(p)
        own = owners(model, self.params)
        self.layers = [mine for _, _, mine in own]
        self.layer_opts = [self.ctx.make_optimizer([self.params[i] for i in mine]) for mine in self.layers]
        elem = self.params[0].element_size() if self.params else 4
        layer_bytes = [sum(self.params[i].numel() for i in mine) * elem for mine in self.layers]
        self.groups = dear_groups(layer_bytes, self.knobs.bucket_mb * MB, self.knobs.nearby_layers)
        self.group_of_layer = {j: g for g, m in enumerate(self.groups) for j in m}
        self.slot: dict[int, tuple[int, int, int]] = {}  # param -> (group, offset, numel)
        self.buffers, self.shards, self.size = [], [], []
        for g, members in enumerate(self.groups):
            off = 0
            for j in members:
                for i in self.layers[j]:
                    self.slot[i] = (g, off, self.params[i].numel())
                    off += self.params[i].numel()
            padded = -(-off // W) * W
            self.size.append(off)
            self.buffers.append(torch.zeros(padded, device=dev, dtype=self.params[0].dtype))
            self.shards.append(torch.zeros(padded // W, device=dev, dtype=self.params[0].dtype))
        self.count = [sum(len(self.layers[j]) for j in m) for m in self.groups]
        self.applied = [True] * len(self.layers)
        self.gathers: list = [None] * len(self.groups)
        self.reduces: list = [None] * len(self.groups)
        self._ready = [False] * len(self.params)
        for j, (_, mod, _) in enumerate(own):
            mod.register_forward_pre_hook(self.pre_hook_applying(j))
        for i, p in enumerate(self.params):
            p.register_post_accumulate_grad_hook(self._make_grad_hook(i))
        self.plan.update(
            buckets=len(self.groups),
            layers=len(self.layers),
            bucket_mb=[round(b.numel() * elem / MB, 3) for b in self.buffers],
            update="all-gather of reduced gradients, every rank steps all parameters",
        )
        return model

    # --- backward: reduce-scatter ---------------------------------------------------------------
    def before_backward(self) -> None:
        self.flush()  # layers forward did not reach (none in our models) still take their update
        self._missing = list(self.count)
        self._next = len(self.groups) - 1  # issue order: last bucket first
        self._ready = [False] * len(self.params)

    def _make_grad_hook(self, i: int):
        def hook(_p):
            self._gradient_in(i)

        return hook

    def _gradient_in(self, i: int) -> None:
        g, off, n = self.slot[i]
        self.buffers[g][off : off + n].copy_(self.params[i].grad.view(-1))
        self._ready[i] = True
        self._missing[g] -= 1
        t = self.ctx.transport
        while self._next >= 0 and self._missing[self._next] == 0:
            b = self._next
            self.reduces[b] = t.reduce_scatter_async(self.buffers[b], self.shards[b], f"dear.rs{b}", priority=b)
            self._next -= 1

    def after_backward(self) -> None:
        for i, done in enumerate(self._ready):  # unused parameters: zero gradients take part too
            if not done:
                self.grad_of(self.params[i])
                self._gradient_in(i)

    def wait(self) -> None:
        """The reduce-scatters finish, then the all-gathers start in forward order (and are not waited)."""
        for h in self.reduces:
            h.wait()
        t = self.ctx.transport
        for g in range(len(self.groups)):
            self.gathers[g] = t.all_gather_async(self.shards[g], self.buffers[g], f"dear.ag{g}", priority=g)
        self.applied = [False] * len(self.layers)

    def step(self) -> None:
        pass  # each layer steps in its forward pre-hook of the next iteration

    # --- next forward: all-gather, update ---------------------------------------------------------
    def _apply(self, j: int) -> None:
        g = self.group_of_layer[j]
        h = self.gathers[g]
        if h is not None:
            with self.forward_wait():
                h.wait_sent()  # on CUDA: until the all-gather has really finished (a completion probe)
                h.wait()
            self.gathers[g] = None
        buf = self.buffers[g]
        for i in self.layers[j]:
            _, off, n = self.slot[i]
            p = self.params[i]
            p.grad.view(-1).copy_(buf[off : off + n])
            p.grad.div_(self.workers)
        self.layer_opts[j].step()
        self.layer_opts[j].zero_grad(set_to_none=False)  # in place: the hooks copy from these tensors
        self.applied[j] = True

    def flush(self) -> None:
        for j, done in enumerate(self.applied):
            if not done:
                self._apply(j)

    # --- facts ------------------------------------------------------------------------------------
    def probe_comm(self, reps: int = 3) -> float:
        """One reduce-scatter and one all-gather of all gradient bytes (padded), nothing to overlap."""
        t, W = self.ctx.transport, self.workers
        n = -(-sum(p.numel() for p in self.params) // W) * W
        full = torch.zeros(n, device=self.ctx.device)
        shard = torch.zeros(n // W, device=self.ctx.device)
        times = []
        for _ in range(reps + 1):
            t0 = time.perf_counter()
            h = t.reduce_scatter_async(full, shard, "dear.probe.rs")
            h.wait_sent()
            h.wait()
            h = t.all_gather_async(shard, full, "dear.probe.ag")
            h.wait_sent()
            h.wait()
            times.append(time.perf_counter() - t0)
        return statistics.median(times[1:])


register(
    "dear",
    DeAR,
    "DeAR: bucketed reduce-scatter overlapped with backward, all-gather with the next forward",
    needs=("reduce_scatter", "all_gather"),
    knobs=DeARKnobs,
    model=Model(dear_model),
)
