"""DenseNet-201 (Huang et al., "Densely Connected Convolutional Networks", CVPR 2017), plain torch.nn.

DenseNet-BC: growth rate 32, dense blocks of (6, 12, 48, 32) layers, bottleneck width 4 x growth,
compression 0.5 in the transitions, 64 stem channels; 224x224x3 images, 1000 classes: 20,013,928
parameters, the same count as torchvision's densenet201. Batch 64 per worker (workloads/vision.py says
why). The tiny variant keeps the structure (stem, four dense blocks, three transitions) at growth 8,
two layers per block, on 64x64 images.

    from workloads import WORKLOADS
    WORKLOADS.get("densenet201-tiny").build()
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from workloads.base import register
from workloads.vision import IMAGE_BATCH, image_spec, init_weights


class DenseLayer(nn.Module):
    """BN-ReLU-Conv1x1 (bn_size x growth) - BN-ReLU-Conv3x3 (growth); its output is concatenated to its input."""

    def __init__(self, in_ch: int, growth: int, bn_size: int):
        super().__init__()
        self.norm1 = nn.BatchNorm2d(in_ch)
        self.conv1 = nn.Conv2d(in_ch, bn_size * growth, 1, bias=False)
        self.norm2 = nn.BatchNorm2d(bn_size * growth)
        self.conv2 = nn.Conv2d(bn_size * growth, growth, 3, padding=1, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.conv1(F.relu(self.norm1(x)))
        y = self.conv2(F.relu(self.norm2(y)))
        return torch.cat([x, y], 1)


class Transition(nn.Sequential):
    """BN-ReLU-Conv1x1 (compressed channels) - AvgPool 2x2 stride 2."""

    def __init__(self, in_ch: int, out_ch: int):
        super().__init__(nn.BatchNorm2d(in_ch), nn.ReLU(), nn.Conv2d(in_ch, out_ch, 1, bias=False), nn.AvgPool2d(2, 2))


class DenseNet(nn.Module):
    def __init__(self, growth: int, blocks: tuple[int, ...], bn_size: int, compression: float, stem: int, classes: int):
        super().__init__()
        layers: list[nn.Module] = [
            nn.Conv2d(3, stem, 7, 2, 3, bias=False),
            nn.BatchNorm2d(stem),
            nn.ReLU(),
            nn.MaxPool2d(3, 2, 1),
        ]
        ch = stem
        for b, n in enumerate(blocks):
            for _ in range(n):
                layers.append(DenseLayer(ch, growth, bn_size))
                ch += growth
            if b < len(blocks) - 1:
                out = int(ch * compression)
                layers.append(Transition(ch, out))
                ch = out
        layers += [nn.BatchNorm2d(ch), nn.ReLU()]
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Linear(ch, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.adaptive_avg_pool2d(self.features(x), 1).flatten(1)
        return self.classifier(x)


def _spec(name: str, cfg: dict, image: int, classes: int, batch: int, description: str):
    def build() -> nn.Module:
        return init_weights(DenseNet(classes=classes, **cfg))

    return register(
        image_spec(name, "densenet", build, image, classes, batch, description, per_sample_norm=False, config=cfg)
    )


_spec(
    "densenet201",
    dict(growth=32, blocks=(6, 12, 48, 32), bn_size=4, compression=0.5, stem=64),
    image=224,
    classes=1000,
    batch=IMAGE_BATCH,
    description="DenseNet-201 (20.0M params), 224x224x3, batch 64",
)
_spec(
    "densenet201-tiny",
    dict(growth=8, blocks=(2, 2, 2, 2), bn_size=4, compression=0.5, stem=16),
    image=64,
    classes=100,
    batch=8,
    description="DenseNet-BC family, growth 8, 2 layers per block, 64x64, for CPU/CI",
)
