"""The workload contract: a name, a model builder, a synthetic batch maker and the study's defaults."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import torch
from torch.utils.flop_counter import FlopCounterMode

from harness.registry import Registry


@dataclass(frozen=True)
class WorkloadSpec:
    name: str
    """Registered name, e.g. `bert-base` or `bert-base-tiny`."""
    family: str
    """Model family: resnet | bert | gpt2 | densenet | inception | vgg."""
    build: Callable[[], torch.nn.Module]
    """Builds the model with random init (seeded by the caller); must also work under
    `with torch.device("meta")` (the profiler counts FLOPs on a meta copy)."""
    make_batch: Callable[..., dict]
    """(batch, seq_len, device, seed) -> dict of tensors made once on the device, incl. labels."""
    loss: Callable[[torch.nn.Module, dict], torch.Tensor]
    """(model, batch) -> scalar loss, mean over the batch (so averaged gradients equal the global batch's)."""
    batch: int
    """Default per-worker batch (the study's: Shi et al., IEEE Network 2021, section "Experimental settings")."""
    seq_len: int | None
    """Default sequence length; None for images."""
    sample_unit: str
    """What one sample is: `img` or `seq`."""
    description: str = ""
    """One line for `ddlbench list`."""
    per_sample_norm: bool = True
    """False when the model normalises over the batch (BatchNorm): data parallelism then equals
    per-shard, not concatenated-batch, single-process training (see tests/test_lossless.py)."""
    config: dict = field(default_factory=dict)
    """The architecture knobs, recorded with results."""


WORKLOADS: Registry[WorkloadSpec] = Registry("workload")


def register(spec: WorkloadSpec) -> WorkloadSpec:
    return WORKLOADS.register(spec.name, spec)


def count_params(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def grad_bytes(model: torch.nn.Module) -> int:
    return sum(p.numel() * p.element_size() for p in model.parameters() if p.requires_grad)


def flops_per_sample(spec: WorkloadSpec, model: torch.nn.Module, seq_len: int | None, device) -> float:
    """Forward + backward FLOPs of one sample, counted by torch.utils.flop_counter on a batch of 2
    (divided by 2: a batch of 1 trips some models' squeeze paths)."""
    batch = spec.make_batch(2, seq_len=seq_len, device=device, seed=12345)
    counter = FlopCounterMode(display=False)
    with counter:
        spec.loss(model, batch).backward()
    model.zero_grad(set_to_none=True)
    return counter.get_total_flops() / 2.0
