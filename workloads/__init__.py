"""Workloads: models built with random init (never a download) from `transformers` configs, or written in
plain torch.nn where transformers has none (DenseNet, Inception-v4, VGG), and synthetic inputs made once
on the device. One file per model family; each registers its names here.

    from workloads import WORKLOADS
    spec = WORKLOADS.get("bert-base-tiny")
    model = spec.build(); batch = spec.make_batch(8, seq_len=64, device="cpu", seed=0)
"""

from workloads import bert, densenet, gpt2, inception, resnet, vgg  # noqa: F401  (registration side effects)
from workloads.base import WORKLOADS, WorkloadSpec, register  # noqa: F401
