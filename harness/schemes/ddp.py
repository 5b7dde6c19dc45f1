"""`ddp`: torch's DistributedDataParallel as users run it (bucketed all-reduce overlapped with backward
by autograd hooks inside DDP's reducer). Knob: bucket_cap_mb (DDP's own; 25 MB by default)."""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import Annotated

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from harness.schemes.base import Scheme, register
from harness.schemes.knobs import Grid, Knobs, Range
from harness.sim.bucketed import ddp as ddp_model
from harness.sim.model import Model


@dataclass(frozen=True)
class DDPKnobs(Knobs):
    bucket_cap_mb: Annotated[float, Range(gt=0), Grid(1, 5, 25, 100)] = 25.0
    """DDP gradient bucket size, MB (DDP's default 25)"""
    broadcast_buffers: Annotated[int, Range(ge=0, le=1)] = 1
    """1 = DDP broadcasts buffers (BatchNorm stats) from rank 0 every forward, as by default; 0 = off"""


class DDP(Scheme):
    def setup(self, model):
        t = self.ctx.transport
        dev = self.ctx.device
        # DDP's default (buffers broadcast from rank 0 every forward) is passed implicitly: newer
        # torch warns when the argument is given at all.
        extra = {} if self.knobs.broadcast_buffers else {"broadcast_buffers": False}
        ddp = DistributedDataParallel(
            model,
            device_ids=[dev.index] if dev.type == "cuda" else None,
            bucket_cap_mb=self.knobs.bucket_cap_mb,
            process_group=t.group,
            **extra,
        )
        super().setup(model)
        self.plan = {"bucket_cap_mb": self.knobs.bucket_cap_mb}
        return ddp

    def probe_comm(self, reps: int = 3) -> float:
        flat = torch.zeros(sum(p.numel() for p in self.params), device=self.ctx.device)
        times = []
        for _ in range(reps + 1):
            t0 = time.perf_counter()
            dist.all_reduce(flat, group=self.ctx.transport.group)
            if flat.is_cuda:
                torch.cuda.synchronize()
            times.append(time.perf_counter() - t0)
        return statistics.median(times[1:])


register(
    "ddp",
    DDP,
    "torch DistributedDataParallel: bucketed all-reduce overlapped with backward",
    needs=("process_group",),
    knobs=DDPKnobs,
    model=Model(ddp_model),
)
