"""ResNet-50 (the study's image workload) from transformers' ResNetConfig, random init.

Defaults: batch 64 per worker, 224x224x3 images, 1000 classes (the study's, Shi et al. 2021).
The tiny variant keeps the bottleneck family with one block per stage on 64x64 images.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from workloads.base import WorkloadSpec, register
from workloads.vision import image_batch_maker


def _builder(cfg: dict):
    def build() -> torch.nn.Module:
        from transformers import ResNetConfig, ResNetForImageClassification

        return ResNetForImageClassification(ResNetConfig(**cfg))

    return build


def _loss(model: torch.nn.Module, batch: dict) -> torch.Tensor:
    logits = model(pixel_values=batch["pixel_values"]).logits
    return F.cross_entropy(logits, batch["labels"])


def _spec(name: str, cfg: dict, image: int, batch: int, description: str) -> WorkloadSpec:
    classes = cfg["num_labels"]
    return WorkloadSpec(
        name=name,
        family="resnet",
        build=_builder(cfg),
        make_batch=image_batch_maker(image, classes),
        loss=_loss,
        batch=batch,
        seq_len=None,
        sample_unit="img",
        description=description,
        per_sample_norm=False,
        config={**cfg, "image": image},
    )


register(
    _spec(
        "resnet50",
        dict(
            depths=[3, 4, 6, 3],
            hidden_sizes=[256, 512, 1024, 2048],
            embedding_size=64,
            layer_type="bottleneck",
            num_labels=1000,
        ),
        image=224,
        batch=64,
        description="ResNet-50 (25.6M params), 224x224x3, batch 64 (the study's)",
    )
)
register(
    _spec(
        "resnet50-tiny",
        dict(
            depths=[1, 1, 1, 1],
            hidden_sizes=[64, 128, 256, 512],
            embedding_size=32,
            layer_type="bottleneck",
            num_labels=100,
        ),
        image=64,
        batch=8,
        description="ResNet bottleneck family, one block per stage, 64x64, for CPU/CI",
    )
)
