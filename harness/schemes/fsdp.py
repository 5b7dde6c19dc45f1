"""`fsdp`: PyTorch's native FSDP2 (`torch.distributed.fsdp.fully_shard`) as its users apply it, the way
torchtitan's parallelize step does: `fully_shard` on each repeated unit of the model (each transformer
block, each ResNet stage; the rule is harness.sim.fsdp.block_units, shared with the simulation),
then on the root, which holds everything else (embeddings, stem, head).

Every parameter is a DTensor sharded over the workers (dim 0). Forward all-gathers a unit's parameters
before it runs; backward all-gathers them again when they were freed after forward
(reshard_after_forward), and reduce-scatters the unit's gradients (averaged over the workers) as soon
as its backward is done; the one SGD recipe then steps on the local shards. The device mesh is the
workers' process group on the cell's device (gloo on CPU, nccl on CUDA).

Knobs: reshard_after_forward (FSDP2's default 1: free after forward, ZeRO-3-like; 0 keeps the gathered
parameters until backward, ZeRO-2-like) and wrap (block | model). Mixed precision: `mp_policy()` is
the one place a MixedPrecisionPolicy comes from (fp32 here: FSDP2's default policy).
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import DeviceMesh

from harness.core.errors import UserError
from harness.schemes.base import Scheme, register
from harness.schemes.knobs import Grid, Knobs, Range
from harness.sim.fsdp import block_units
from harness.sim.fsdp import fsdp as fsdp_model
from harness.sim.model import Model

if TYPE_CHECKING:
    from torch.distributed.fsdp import MixedPrecisionPolicy

WRAPS = ("block", "model")


@dataclass(frozen=True)
class FSDPKnobs(Knobs):
    reshard_after_forward: Annotated[int, Range(ge=0, le=1), Grid(1, 0)] = 1
    """1 = free each unit's gathered parameters after forward, all-gather again in backward (FSDP2's
    default); 0 = keep them"""
    wrap: str = "block"
    """fully_shard units: block = each transformer block / ResNet stage, then the root (torchtitan's
    way); model = the root only"""

    def __post_init__(self):
        if self.wrap not in WRAPS:
            raise UserError(
                f"knob wrap={self.wrap!r} of scheme 'fsdp' is not one of {', '.join(WRAPS)} "
                f"(the fully_shard granularity); fix it in the sweep file or --knob"
            )


class FSDP(Scheme):
    native_precision = True  # a bf16 cell runs FSDP2's MixedPrecisionPolicy, not torch.autocast

    def mp_policy(self) -> MixedPrecisionPolicy:
        """The MixedPrecisionPolicy every fully_shard call gets: fp32 cell, FSDP2's default (no casts); bf16
        cell, torchtitan's (parameters all-gathered and computed in bf16, float inputs cast at the root,
        gradients reduce-scattered in fp32 into the fp32 shards; docs/ARCHITECTURE.md, "Precision")."""
        from torch.distributed.fsdp import MixedPrecisionPolicy  # a second of imports the driver never needs

        if self.ctx.dtype == "bf16":
            return MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
        return MixedPrecisionPolicy()

    def reduce_dtype(self) -> str:
        return "fp32"  # the policy's reduce_dtype in either cell

    def setup(self, model):
        from torch.distributed.fsdp import fully_shard  # imported where used: see mp_policy

        t = self.ctx.transport
        dev = self.ctx.device
        elem = next(model.parameters()).element_size()
        self._grad_bytes = sum(p.numel() * elem for p in model.parameters() if p.requires_grad)
        mesh = DeviceMesh.from_group(t.group, dev.type)
        reshard = bool(self.knobs.reshard_after_forward)
        holding = [n for n, m in model.named_modules() if n and any(True for _ in m.parameters())]
        names = block_units(holding) if self.knobs.wrap == "block" else []
        modules = dict(model.named_modules())
        units = [modules[n] for n in names]
        policy = self.mp_policy()
        for unit in units:
            fully_shard(unit, mesh=mesh, reshard_after_forward=reshard, mp_policy=policy)
        fully_shard(model, mesh=mesh, reshard_after_forward=reshard, mp_policy=policy)
        self.model = model
        super().setup(model)  # the one optimizer recipe, over the local shards (DTensors)
        self._unit_bytes = [sum(p.numel() * elem for p in u.parameters()) for u in units]
        root = self._grad_bytes - sum(self._unit_bytes)
        gathers = root + sum(self._unit_bytes) * (2 if reshard else 1)  # the root is kept for backward
        gathers = gathers * 2 // elem if self.ctx.dtype == "bf16" else gathers  # all-gathered in param_dtype bf16
        self.plan.update(
            wrap=self.knobs.wrap,
            units=len(units) + 1,
            reshard_after_forward=int(reshard),
            first_units=names[:3],
            all_gather_mb_per_iter=round(gathers / (1 << 20), 3),
            reduce_scatter_mb_per_iter=round(self._grad_bytes / (1 << 20), 3),
        )
        return model

    def comm_bytes_per_iter(self) -> int:
        """The gradient bytes once, as recorded for ZeRO-3 (the all-gathers' bytes are in describe())."""
        return self._grad_bytes

    def final_parameters(self, model) -> dict:
        """Full parameters on every rank (each holds a dim-0 shard: gathered, collectively). Gathered as host
        copies of the local shards through the group's object all-gather, a path every backend supports
        for CUDA tensors: DTensor's `full_tensor()` goes through the coalesced all-gather, which gloo lacks
        for CUDA tensors (pytorch issue 152645: a segmentation fault with ranks sharing a GPU over gloo)."""
        group = self.ctx.transport.group
        out = {}
        for n, p in model.named_parameters():
            local = p.to_local().detach().cpu().clone()
            if p.dim() == 0:  # nothing to shard
                out[n] = local
                continue
            shards = [None] * dist.get_world_size(group)
            dist.all_gather_object(shards, local, group=group)
            out[n] = torch.cat([s.reshape(-1, *p.shape[1:]) for s in shards])[: p.shape[0]].reshape(p.shape)
        return out

    def probe_comm(self, reps: int = 3) -> float:
        """One reduce-scatter and one all-gather of all gradient bytes, nothing to overlap."""
        t, W = self.ctx.transport, self.ctx.workers
        n = -(-self._grad_bytes // 4 // W) * W
        full = torch.zeros(n, device=self.ctx.device)
        shard = torch.zeros(n // W, device=self.ctx.device)
        times = []
        for _ in range(reps + 1):
            t0 = time.perf_counter()
            for h in (t.reduce_scatter_async(full, shard, "fsdp.probe.rs"),):
                h.wait_sent()
                h.wait()
            for h in (t.all_gather_async(shard, full, "fsdp.probe.ag"),):
                h.wait_sent()
                h.wait()
            times.append(time.perf_counter() - t0)
        return statistics.median(times[1:])


register(
    "fsdp",
    FSDP,
    "PyTorch FSDP2 (fully_shard per block, then the root): sharded parameters, gradients, state",
    needs=("process_group",),
    knobs=FSDPKnobs,
    model=Model(fsdp_model),
)
