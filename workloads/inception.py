"""Inception-v4 (Szegedy et al., "Inception-v4, Inception-ResNet and the Impact of Residual Connections on
Learning", AAAI 2017, arXiv 1602.07261, figures 3-9), plain torch.nn.

Stem (fig. 3), 4 x Inception-A, Reduction-A (k, l, m, n = 192, 224, 256, 384), 7 x Inception-B, Reduction-B,
3 x Inception-C, global average pool, 1536 -> 1000 classifier; every convolution is conv (no bias) +
BatchNorm (eps 1e-3) + ReLU, as in the reference PyTorch port (Cadene's pretrainedmodels `inceptionv4`,
also timm's), whose 42,679,816 parameters this matches on 299x299x3 images. The paper's dropout (keep 0.8)
before the classifier is left out so that methods can be proven lossless (random masks differ per
rank). Batch 64 per worker (workloads/vision.py says why).

The tiny variant keeps every block type and the stem at 1/8 width, one block per stage, on 107x107 images:
the smallest size at which every stride-2 "valid" convolution divides exactly and the last map is 2x2
(299 -> 149 -> 147 -> 73 -> 71 -> 35 -> 17 -> 8; 107 -> 53 -> 51 -> 25 -> 23 -> 11 -> 5 -> 2).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from workloads.base import register
from workloads.vision import IMAGE_BATCH, image_spec, init_weights


class Conv(nn.Sequential):
    """Conv (no bias) - BatchNorm (eps 1e-3, the reference port's) - ReLU."""

    def __init__(self, cin: int, cout: int, k, s=1, p=0):
        super().__init__(nn.Conv2d(cin, cout, k, s, p, bias=False), nn.BatchNorm2d(cout, eps=1e-3), nn.ReLU())
        self.out_ch = cout


def _seq(cin: int, *specs) -> nn.Sequential:
    """A chain of Conv from (cout, kernel, stride, padding) tuples; `.out_ch` is the last one's."""
    layers = []
    for cout, k, s, p in specs:
        layers.append(Conv(cin, cout, k, s, p))
        cin = cout
    seq = nn.Sequential(*layers)
    seq.out_ch = cin
    return seq


class Branches(nn.Module):
    """Branches applied to the same input, concatenated on channels. A branch given as an int `c` is the
    pooling branch of a reduction block (3x3 max-pool stride 2), passing `c` channels through."""

    def __init__(self, *branches):
        super().__init__()
        self.out_ch = 0
        mods = []
        for b in branches:
            if isinstance(b, int):
                mods.append(nn.MaxPool2d(3, 2))
                self.out_ch += b
            else:
                mods.append(b)
                self.out_ch += b.out_ch
        self.branches = nn.ModuleList(mods)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([b(x) for b in self.branches], 1)


class AvgPoolConv(nn.Sequential):
    """The pooling branch of the Inception blocks: 3x3 average pool stride 1 (padding not counted) + 1x1 conv."""

    def __init__(self, cin: int, cout: int):
        super().__init__(nn.AvgPool2d(3, 1, 1, count_include_pad=False), Conv(cin, cout, 1))
        self.out_ch = cout


class InceptionC(nn.Module):
    """Fig. 6: two of its branches split into parallel 1x3 and 3x1 convolutions."""

    def __init__(self, cin: int, w: Callable[[int], int]):
        super().__init__()
        self.b0 = Conv(cin, w(256), 1)
        self.b1 = Conv(cin, w(384), 1)
        self.b1a = Conv(w(384), w(256), (1, 3), 1, (0, 1))
        self.b1b = Conv(w(384), w(256), (3, 1), 1, (1, 0))
        self.b2 = _seq(cin, (w(384), 1, 1, 0), (w(448), (3, 1), 1, (1, 0)), (w(512), (1, 3), 1, (0, 1)))
        self.b2a = Conv(w(512), w(256), (1, 3), 1, (0, 1))
        self.b2b = Conv(w(512), w(256), (3, 1), 1, (1, 0))
        self.b3 = AvgPoolConv(cin, w(256))
        self.out_ch = 6 * w(256)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y1 = self.b1(x)
        y2 = self.b2(x)
        return torch.cat([self.b0(x), self.b1a(y1), self.b1b(y1), self.b2a(y2), self.b2b(y2), self.b3(x)], 1)


class InceptionV4(nn.Module):
    def __init__(self, width: float, blocks: tuple[int, int, int], classes: int):
        super().__init__()

        def w(c: int) -> int:
            return max(1, int(c * width))

        # Stem, fig. 3 ("V" = valid padding)
        stem = _seq(3, (w(32), 3, 2, 0), (w(32), 3, 1, 0), (w(64), 3, 1, 1))
        layers: list[nn.Module] = [stem]
        mixed3a = Branches(stem.out_ch, Conv(stem.out_ch, w(96), 3, 2))
        mixed4a = Branches(
            _seq(mixed3a.out_ch, (w(64), 1, 1, 0), (w(96), 3, 1, 0)),
            _seq(
                mixed3a.out_ch,
                (w(64), 1, 1, 0),
                (w(64), (1, 7), 1, (0, 3)),
                (w(64), (7, 1), 1, (3, 0)),
                (w(96), 3, 1, 0),
            ),
        )
        mixed5a = Branches(Conv(mixed4a.out_ch, w(192), 3, 2), mixed4a.out_ch)
        layers += [mixed3a, mixed4a, mixed5a]
        ch = mixed5a.out_ch
        for _ in range(blocks[0]):  # Inception-A, fig. 4
            blk = Branches(
                Conv(ch, w(96), 1),
                _seq(ch, (w(64), 1, 1, 0), (w(96), 3, 1, 1)),
                _seq(ch, (w(64), 1, 1, 0), (w(96), 3, 1, 1), (w(96), 3, 1, 1)),
                AvgPoolConv(ch, w(96)),
            )
            layers.append(blk)
            ch = blk.out_ch
        # Reduction-A, fig. 7, with Inception-v4's k, l, m, n = 192, 224, 256, 384 (table 1)
        red = Branches(Conv(ch, w(384), 3, 2), _seq(ch, (w(192), 1, 1, 0), (w(224), 3, 1, 1), (w(256), 3, 2, 0)), ch)
        layers.append(red)
        ch = red.out_ch
        for _ in range(blocks[1]):  # Inception-B, fig. 5
            blk = Branches(
                Conv(ch, w(384), 1),
                _seq(ch, (w(192), 1, 1, 0), (w(224), (1, 7), 1, (0, 3)), (w(256), (7, 1), 1, (3, 0))),
                _seq(
                    ch,
                    (w(192), 1, 1, 0),
                    (w(192), (7, 1), 1, (3, 0)),
                    (w(224), (1, 7), 1, (0, 3)),
                    (w(224), (7, 1), 1, (3, 0)),
                    (w(256), (1, 7), 1, (0, 3)),
                ),
                AvgPoolConv(ch, w(128)),
            )
            layers.append(blk)
            ch = blk.out_ch
        # Reduction-B, fig. 8
        red = Branches(
            _seq(ch, (w(192), 1, 1, 0), (w(192), 3, 2, 0)),
            _seq(ch, (w(256), 1, 1, 0), (w(256), (1, 7), 1, (0, 3)), (w(320), (7, 1), 1, (3, 0)), (w(320), 3, 2, 0)),
            ch,
        )
        layers.append(red)
        ch = red.out_ch
        for _ in range(blocks[2]):  # Inception-C, fig. 6
            blk = InceptionC(ch, w)
            layers.append(blk)
            ch = blk.out_ch
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Linear(ch, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(F.adaptive_avg_pool2d(self.features(x), 1).flatten(1))


def _spec(name: str, cfg: dict, image: int, classes: int, batch: int, description: str):
    def build() -> nn.Module:
        return init_weights(InceptionV4(classes=classes, **cfg))

    return register(
        image_spec(name, "inception", build, image, classes, batch, description, per_sample_norm=False, config=cfg)
    )


_spec(
    "inception-v4",
    dict(width=1.0, blocks=(4, 7, 3)),
    image=299,
    classes=1000,
    batch=IMAGE_BATCH,
    description="Inception-v4 (42.7M params), 299x299x3, batch 64",
)
_spec(
    "inception-v4-tiny",
    dict(width=0.125, blocks=(1, 1, 1)),
    image=107,
    classes=100,
    batch=8,
    description="Inception-v4 family, 1/8 width, one block per stage, 107x107, for CPU/CI",
)
