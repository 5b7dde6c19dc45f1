"""What the image-classification workloads share: ImageNet-shaped synthetic batches, the cross-entropy
loss of a plain `torch.nn` classifier, its initialisation, and the spec.

The models themselves live one per file (densenet.py, inception.py, vgg.py); resnet.py takes only the
batch maker from here (its model comes from transformers).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from workloads.base import WorkloadSpec

# Per-worker batch of the image models added after the study: 64, the study's per-worker batch for its
# image model (ResNet-50 at 224x224; Shi et al., "A Quantitative Survey of Communication Optimizations in
# Distributed Deep Learning", IEEE Network 2021), so every image workload is compared at the same
# per-worker batch under weak scaling. Other benchmarks use 32 (Horovod's pytorch_synthetic_benchmark.py
# default) to 64 per GPU; `--batch` overrides it.
IMAGE_BATCH = 64


def image_batch_maker(image: int, classes: int):
    """(batch, seq_len, device, seed) -> {pixel_values: N x 3 x image x image, labels: N}, made once."""

    def make_batch(batch: int, seq_len=None, device="cpu", seed: int = 0) -> dict:
        g = torch.Generator().manual_seed(seed)
        x = torch.randn(batch, 3, image, image, generator=g)
        y = torch.randint(0, classes, (batch,), generator=g)
        return {"pixel_values": x.to(device), "labels": y.to(device)}

    return make_batch


def classifier_loss(model: nn.Module, batch: dict) -> torch.Tensor:
    """Mean cross-entropy of a model that maps images to logits."""
    return F.cross_entropy(model(batch["pixel_values"]), batch["labels"])


def init_weights(model: nn.Module) -> nn.Module:
    """He-normal convolutions (He et al., ICCV 2015, fan-out, as torchvision's DenseNet/VGG do), BatchNorm
    at identity, linear layers N(0, 0.01) (torchvision's VGG), every bias 0. Uses torch's global RNG:
    the caller seeds it."""
    for m in model.modules():
        if isinstance(m, nn.Conv2d):
            nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            if m.bias is not None:
                nn.init.zeros_(m.bias)
        elif isinstance(m, nn.BatchNorm2d):
            nn.init.ones_(m.weight)
            nn.init.zeros_(m.bias)
        elif isinstance(m, nn.Linear):
            nn.init.normal_(m.weight, 0.0, 0.01)
            nn.init.zeros_(m.bias)
    return model


def image_spec(
    name: str,
    family: str,
    build: Callable[[], nn.Module],
    image: int,
    classes: int,
    batch: int,
    description: str,
    per_sample_norm: bool,
    config: dict,
) -> WorkloadSpec:
    return WorkloadSpec(
        name=name,
        family=family,
        build=build,
        make_batch=image_batch_maker(image, classes),
        loss=classifier_loss,
        batch=batch,
        seq_len=None,
        sample_unit="img",
        description=description,
        per_sample_norm=per_sample_norm,
        config={**config, "num_labels": classes, "image": image},
    )
