"""Bring your own model: a workload named by its Python path instead of a registered name.

    ddlbench run --workload examples.byom_model:build --scheme ddp --workers 2
    ddlbench profile examples.byom_model:build -o prof.parquet
    ddlbench advise --workload examples.byom_model:build --workers 2

(run from the repository root, or put the folder holding your package on PYTHONPATH; ddlbench passes it
on to every rank). `build` below takes no arguments and returns a `workloads.base.WorkloadSpec`; its
contract is that of the shipped workloads (docs/ARCHITECTURE.md, "Workload"):

- `build()` makes the model with random init (the harness seeds torch's RNG before calling it, so every
  rank gets the same weights) and must also work under `with torch.device("meta")` (the profiler
  counts FLOPs on a meta copy): create tensors through modules, not on an explicit device;
- `make_batch(batch, seq_len=None, device="cpu", seed=0)` returns a dict of tensors made once on the
  device, labels included, the same for the same seed;
- `loss(model, batch)` returns a scalar that is a *mean* over the batch, so averaged gradients equal
  the global batch's (what makes data parallelism lossless);
- `per_sample_norm=False` if the model normalises over the batch (BatchNorm).

The model here: a small residual MLP over a bag of token embeddings, a text classifier of 1.25 M
parameters in 15 tensors, small enough for CPU tests.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from workloads.base import WorkloadSpec

VOCAB, WIDTH, DEPTH, CLASSES, SEQ = 4096, 256, 3, 10, 32


class Block(nn.Module):
    def __init__(self, width: int):
        super().__init__()
        self.norm = nn.LayerNorm(width)  # per sample, unlike BatchNorm: lossless against the global batch
        self.fc = nn.Linear(width, width)

    def forward(self, x):
        return x + F.gelu(self.fc(self.norm(x)))


class BagClassifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, WIDTH)
        self.blocks = nn.Sequential(*(Block(WIDTH) for _ in range(DEPTH)))
        self.head = nn.Linear(WIDTH, CLASSES)

    def forward(self, input_ids):
        return self.head(self.blocks(self.embed(input_ids).mean(dim=1)))


def make_batch(batch: int, seq_len=None, device="cpu", seed: int = 0) -> dict:
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, VOCAB, (batch, seq_len or SEQ), generator=g)
    labels = torch.randint(0, CLASSES, (batch,), generator=g)
    return {"input_ids": ids.to(device), "labels": labels.to(device)}


def loss(model: nn.Module, batch: dict) -> torch.Tensor:
    return F.cross_entropy(model(batch["input_ids"]), batch["labels"])  # mean over the batch


def build() -> WorkloadSpec:
    return WorkloadSpec(
        name="byom-bag-classifier",
        family="custom",
        build=BagClassifier,
        make_batch=make_batch,
        loss=loss,
        batch=16,
        seq_len=SEQ,
        sample_unit="seq",
        description="example: residual MLP over token embeddings (bring your own model)",
        config={"vocab": VOCAB, "width": WIDTH, "depth": DEPTH, "classes": CLASSES},
    )
