"""The GPU part of the environment record (docs/ARCHITECTURE.md, "Results"): driver, cuDNN, the node's GPU
topology (`nvidia-smi topo -m`), the NCCL_* variables, torch's precision defaults and the GPU models.
Every value is a string, empty on a machine without CUDA (or without nvidia-smi): nothing here fails.
`gpu_driver` and `gpu_topology` are fingerprinted (harness/results/environment.py).

Ranks record their own device's name (harness/rank/worker.py, `device_name`); `gpu_models` summarises them
per cell, so a multi-node cell names every node's GPUs, not only the driver's."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections import Counter
from pathlib import Path

import torch

NVIDIA_SMI_TIMEOUT_S = 10


def _smi(*args: str) -> str:
    """nvidia-smi's output, '' when it is absent or fails."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return ""
    try:
        out = subprocess.run([exe, *args], capture_output=True, text=True, timeout=NVIDIA_SMI_TIMEOUT_S)
    except (OSError, subprocess.SubprocessError):
        return ""
    return out.stdout.strip() if out.returncode == 0 else ""


def driver_version() -> str:
    first = _smi("--query-gpu=driver_version", "--format=csv,noheader").splitlines()
    if first:
        return first[0].strip()
    try:  # the kernel module says it too: "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.14 ..."
        words = Path("/proc/driver/nvidia/version").read_text().split("Kernel Module", 1)[1].split()
        return words[0] if words else ""
    except (OSError, IndexError):
        return ""


def cudnn_version() -> str:
    if not torch.cuda.is_available():
        return ""
    try:
        v = torch.backends.cudnn.version()
    except Exception:  # a build without cuDNN
        return ""
    return str(v) if v else ""


def nccl_env(environ=None) -> str:
    """NCCL_* variables of this process as sorted JSON ('' when there are none)."""
    env = os.environ if environ is None else environ
    found = {k: v for k, v in env.items() if k.startswith("NCCL_")}
    return json.dumps(found, sort_keys=True) if found else ""


def precision_defaults() -> str:
    """torch's TF32 switches as this process sees them (JSON). Each cell records what it ran with in its
    facts (matmul_allow_tf32, cudnn_allow_tf32: off for fp32 cells); this is the default they override."""
    return json.dumps(
        {
            "matmul_allow_tf32": bool(torch.backends.cuda.matmul.allow_tf32),
            "cudnn_allow_tf32": bool(torch.backends.cudnn.allow_tf32),
            "float32_matmul_precision": torch.get_float32_matmul_precision(),
        },
        sort_keys=True,
    )


def gpu_models(names) -> str:
    """'2 x NVIDIA A100-SXM4-80GB' per distinct model, from device names ('' entries, CPU ranks, ignored)."""
    counts = Counter(n for n in names if n)
    return "; ".join(f"{c} x {n}" for n, c in sorted(counts.items()))


def local_gpu_models() -> str:
    if not torch.cuda.is_available():
        return ""
    return gpu_models(torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count()))


def collect(device: str = "cpu") -> dict:
    """The GPU columns of the environment row; all empty on CPU."""
    cuda = device == "cuda" and torch.cuda.is_available()
    return {
        "gpu_driver": driver_version() if cuda else "",
        "cudnn": cudnn_version() if cuda else "",
        "gpu_topology": _smi("topo", "-m") if cuda else "",
        "nccl_env": nccl_env() if cuda else "",
        "precision_defaults": precision_defaults() if cuda else "",
        "gpu_models": local_gpu_models() if cuda else "",
    }
