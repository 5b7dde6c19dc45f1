"""VGG-16 (Simonyan & Zisserman, "Very Deep Convolutional Networks for Large-Scale Image Recognition",
ICLR 2015, configuration D), plain torch.nn: the communication-heavy model of most gradient-scheduling
papers (most of its 138M parameters sit in the first fully connected layer, computed last in forward).

Thirteen 3x3 convolutions (with bias, no BatchNorm) in five stages separated by 2x2 max-pools, then
4096-4096-1000 fully connected layers on the 7x7x512 map; 224x224x3 images: 138,357,544 parameters (the
same count as torchvision's vgg16). The paper's dropout (0.5) after the first two FC layers is left out:
random masks differ between a data-parallel run and single-process training, so a method could not be
proven lossless; its compute is negligible. Batch 64 per worker (workloads/vision.py says why).
The tiny variant keeps configuration D's 13 convolutions, 5 pools and 3 FC layers at 1/8 width, on
32x32 images (a 1x1 map before the classifier).
"""

from __future__ import annotations

import torch
from torch import nn

from workloads.base import register
from workloads.vision import IMAGE_BATCH, image_spec, init_weights

# Configuration D of the paper's Table 1: output channels per 3x3 conv, "M" = 2x2 max-pool stride 2.
CONFIG_D = (64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M")


class VGG(nn.Module):
    def __init__(self, width: float, fc: int, pool: int, classes: int):
        super().__init__()
        layers: list[nn.Module] = []
        ch = 3
        for v in CONFIG_D:
            if v == "M":
                layers.append(nn.MaxPool2d(2, 2))
            else:
                out = int(v * width)
                layers += [nn.Conv2d(ch, out, 3, padding=1), nn.ReLU()]
                ch = out
        self.features = nn.Sequential(*layers)
        # adaptive pooling to the map the paper's 224x224 input gives (7x7), as torchvision does
        self.pool = nn.AdaptiveAvgPool2d(pool)
        self.classifier = nn.Sequential(
            nn.Linear(ch * pool * pool, fc), nn.ReLU(), nn.Linear(fc, fc), nn.ReLU(), nn.Linear(fc, classes)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.pool(self.features(x)).flatten(1))


def _spec(name: str, cfg: dict, image: int, classes: int, batch: int, description: str):
    def build() -> nn.Module:
        return init_weights(VGG(classes=classes, **cfg))

    return register(
        image_spec(name, "vgg", build, image, classes, batch, description, per_sample_norm=True, config=cfg)
    )


_spec(
    "vgg16",
    dict(width=1.0, fc=4096, pool=7),
    image=224,
    classes=1000,
    batch=IMAGE_BATCH,
    description="VGG-16 (138.4M params), configuration D, 224x224x3, batch 64",
)
_spec(
    "vgg16-tiny",
    dict(width=0.125, fc=256, pool=1),
    image=32,
    classes=100,
    batch=8,
    description="VGG configuration D at 1/8 width, FC 256-256, 32x32, for CPU/CI",
)
