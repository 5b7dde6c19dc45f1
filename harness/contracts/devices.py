"""Which GPU a rank uses: one rule for the worker, commbench and DeepSpeed (docs/ARCHITECTURE.md, "Devices").

A rank sees the devices CUDA_VISIBLE_DEVICES leaves it. With one task per GPU under Slurm
(`--gpus-per-task=1`, `--gpu-bind=...`) each task sees exactly one device, whatever its local rank: it is
index 0 there (`cuda:<local_rank>` would be an invalid ordinal on every rank but the first). Otherwise the
node's ranks share the visible devices and local rank i takes device i; a local rank with no device of its
own is refused (NCCL cannot put two ranks of one communicator on one GPU), unless the cell asks for gloo
(`dist_backend: gloo`), which lets several ranks share one GPU (local rank i takes device i mod visible).

Which torch.distributed backend carries a device's tensors follows the device's *type*, never its string
(`torch.device("cuda", 0)` prints as "cuda:0"): NCCL for CUDA, gloo for CPU tensors (the parameter
servers' traffic) and for every tensor when the cell asks for gloo. The rank records the backend its
workers' group really uses (`dist.get_backend(group)`), and a CUDA cell whose group is not NCCL fails in
one line unless gloo was asked for (docs/ARCHITECTURE.md, "Devices").
"""

from __future__ import annotations

import os

import torch

from harness.contracts.cell import DIST_BACKENDS
from harness.core.errors import UserError


def process_group_backend(device: torch.device, requested: str = "auto") -> str:
    """The `backend` argument of init_process_group for ranks computing on `device`. Pure: decided by
    `device.type`, so "cuda:0" and "cuda" are the same. With NCCL, gloo still serves CPU tensors."""
    check_dist_backend(requested, device.type)
    if device.type == "cuda" and requested in ("auto", "nccl"):
        return "cpu:gloo,cuda:nccl"
    return "gloo"


def check_dist_backend(requested: str, device_type: str) -> None:
    """UserError for a backend the cell cannot use on its device type."""
    if requested not in DIST_BACKENDS:
        raise UserError(
            f"unknown dist backend {requested!r}: use {', '.join(DIST_BACKENDS)}; fix "
            f"--dist-backend or `dist_backend:` in the sweep file"
        )
    if requested == "nccl" and device_type != "cuda":
        raise UserError(
            "dist backend nccl moves CUDA tensors only, and this cell computes on the CPU; use "
            "--dist-backend gloo (or auto), or --device cuda"
        )


def tensor_backend(group_backend: str, device_type: str) -> str:
    """Which library moves `device_type` tensors in a group whose `dist.get_backend(group)` is
    `group_backend` ("gloo", "nccl", or per device type as in "cpu:gloo,cuda:nccl"); "" if none. Pure."""
    group_backend = str(group_backend).lower()
    if ":" not in group_backend:
        if group_backend == "nccl" and device_type != "cuda":
            return ""
        return group_backend
    for part in group_backend.split(","):
        kind, _, name = part.partition(":")
        if kind.strip() == device_type:
            return name.strip()
    return ""


def check_group_backend(device_type: str, requested: str, actual: str) -> None:
    """A CUDA cell's workers must reduce over NCCL, unless the cell asked for gloo: gloo copies every CUDA
    tensor through host memory (10-100x slower, no NVLink or InfiniBand). UserError (one line) otherwise."""
    if device_type != "cuda" or requested == "gloo":
        return
    if actual != "nccl" and not actual.endswith("-nccl"):
        raise UserError(
            f"this CUDA cell's workers reduce over {actual or 'nothing'!r}, not NCCL: its numbers "
            f"would be host copies, not GPU communication; install a torch with NCCL, or run it "
            f"over gloo on purpose with --dist-backend gloo"
        )


def device_index(local_rank: int, visible: int, share: bool = False) -> int:
    """Index among the visible devices for `local_rank` when `visible` devices are visible; `share`
    (gloo cells) lets ranks beyond the devices share them round-robin. Pure."""
    if visible < 1:
        raise UserError(
            f"local rank {local_rank} asks for a CUDA device but none is visible "
            f"(CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES', '<unset>')}); "
            "run the cell with --device cpu or on a node with GPUs"
        )
    if visible == 1:
        return 0  # per-task binding (or a one-GPU node): the one device this task sees
    if local_rank < visible or share:
        return local_rank % visible
    raise UserError(
        f"local rank {local_rank} has no GPU of its own: {visible} are visible to this task; "
        "run at most one rank per GPU on a node (fewer workers per node, or one GPU per task), "
        "or share GPUs over gloo on purpose with --dist-backend gloo"
    )


def rank_device(local_rank: int, kind: str = "cuda", dist_backend: str = "auto") -> torch.device:
    """The device of a rank with this local rank, made current (torch.cuda.set_device) on CUDA."""
    if kind != "cuda":
        return torch.device("cpu")
    visible = torch.cuda.device_count() if torch.cuda.is_available() else 0
    dev = torch.device("cuda", device_index(local_rank, visible, share=dist_backend == "gloo"))
    torch.cuda.set_device(dev)
    return dev


def device_name(device: torch.device) -> str:
    """The GPU's model name ('' on CPU), recorded with each rank's results."""
    return torch.cuda.get_device_name(device) if device.type == "cuda" else ""
