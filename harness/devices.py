"""Which GPU a rank uses: one rule for the worker, commbench and DeepSpeed (docs/ARCHITECTURE.md, "Devices").

A rank sees the devices CUDA_VISIBLE_DEVICES leaves it. With one task per GPU under Slurm
(`--gpus-per-task=1`, `--gpu-bind=...`) each task sees exactly one device, whatever its local rank: it is
index 0 there (`cuda:<local_rank>` would be an invalid ordinal on every rank but the first). Otherwise the
node's ranks share the visible devices and local rank i takes device i; a local rank with no device of its
own is refused (NCCL cannot put two ranks of one communicator on one GPU).
"""

from __future__ import annotations

import os

import torch

from harness.errors import UserError


def device_index(local_rank: int, visible: int) -> int:
    """Index among the visible devices for `local_rank` when `visible` devices are visible. Pure."""
    if visible < 1:
        raise UserError(f"local rank {local_rank} asks for a CUDA device but none is visible "
                        f"(CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES', '<unset>')}); "
                        "run the cell with --device cpu or on a node with GPUs")
    if visible == 1:
        return 0  # per-task binding (or a one-GPU node): the one device this task sees
    if local_rank < visible:
        return local_rank
    raise UserError(f"local rank {local_rank} has no GPU of its own: {visible} are visible to this task; "
                    "run at most one rank per GPU on a node (fewer workers per node, or one GPU per task)")


def rank_device(local_rank: int, kind: str = "cuda") -> torch.device:
    """The device of a rank with this local rank, made current (torch.cuda.set_device) on CUDA."""
    if kind != "cuda":
        return torch.device("cpu")
    visible = torch.cuda.device_count() if torch.cuda.is_available() else 0
    dev = torch.device("cuda", device_index(local_rank, visible))
    torch.cuda.set_device(dev)
    return dev


def device_name(device: torch.device) -> str:
    """The GPU's model name ('' on CPU), recorded with each rank's results."""
    return torch.cuda.get_device_name(device) if device.type == "cuda" else ""
