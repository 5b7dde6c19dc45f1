"""The `deepspeed` backend's transport: torch.distributed on the group DeepSpeed initialised (barrier,
objects, all-reduce); the ZeRO schemes do their gradient communication inside the engine, not through it.

DeepSpeed JIT-compiles C++ ops on first use into TORCH_EXTENSIONS_DIR; we use the folder
scripts/install_frameworks.sh pre-compiled them into (same default, computed the same way).
"""

from __future__ import annotations

import datetime
import functools
import importlib.util
import os
import shutil
import sys
from pathlib import Path

import torch

from harness.backends.interfaces import choose_interface
from harness.backends.torch_dist import TorchTransport
from harness.contracts.devices import process_group_backend
from harness.procs.argv import launcher_exe

INSTALL = "bash scripts/install_frameworks.sh deepspeed"


def extensions_dir() -> str:
    """TORCH_EXTENSIONS_DIR, or the installer's default: $DDLBENCH_CACHE (~/.cache/ddlbench)/torch_extensions/
    torch<base>-py<XY>-<flavour>, keyed by torch and python because compiled ops are valid only for them."""
    if os.environ.get("TORCH_EXTENSIONS_DIR"):
        return os.environ["TORCH_EXTENSIONS_DIR"]
    cache = Path(os.environ.get("DDLBENCH_CACHE", Path.home() / ".cache" / "ddlbench"))
    base, _, flavour = torch.__version__.partition("+")
    if not flavour:
        flavour = "cu" + torch.version.cuda.replace(".", "") if torch.version.cuda else "cpu"
    return str(cache / "torch_extensions" / f"torch{base}-py{sys.version_info[0]}{sys.version_info[1]}-{flavour}")


def deepspeed_local_rank(device: torch.device, local_rank: int) -> str:
    """The LOCAL_RANK DeepSpeed must see. DeepSpeed reads LOCAL_RANK as the CUDA ordinal (the process
    group's device_id, the engine's device, ZeRO-3's partitions), so under per-task GPU binding, where a
    task sees one device, the launcher's local rank 1 is an invalid ordinal: give it the device the
    harness chose (harness/contracts/devices.py, the worker's rule). CPU: unchanged."""
    return str(device.index if device.type == "cuda" and device.index is not None else local_rank)


def name_accelerator(device_type: str) -> None:
    """Tell DeepSpeed which accelerator it runs on before it is imported (DS_ACCELERATOR, unless the user
    set it): left to detect it, DeepSpeed warns "Setting accelerator to CPU. If you have GPU ..." on
    every CPU import, the first line of every doctor report and CPU cell log."""
    os.environ.setdefault("DS_ACCELERATOR", "cuda" if device_type == "cuda" else "cpu")


def start(cell, me, device):
    facts = choose_interface(me)
    os.environ.setdefault("TORCH_EXTENSIONS_DIR", extensions_dir())
    device = torch.device(device)
    os.environ["LOCAL_RANK"] = deepspeed_local_rank(device, me.local_rank)  # before init: device_id
    name_accelerator(device.type)
    import deepspeed  # optional: only this backend needs DeepSpeed

    # the device's type decides (harness/contracts/devices.py): NCCL for CUDA unless the cell asks for gloo
    backend = "nccl" if process_group_backend(device, cell.dist_backend).endswith("nccl") else "gloo"
    deepspeed.init_distributed(
        dist_backend=backend, timeout=datetime.timedelta(seconds=max(30.0, float(cell.timeout_s))), verbose=False
    )
    transport = TorchTransport(cell, me, device)
    transport.facts.update(facts)
    return transport


@functools.lru_cache(maxsize=1)
def available() -> str | None:
    if importlib.util.find_spec("deepspeed") is None:
        return f"backend deepspeed is not installed here; install it: {INSTALL}"
    if shutil.which(launcher_exe("deepspeed")) is None:
        return f"backend deepspeed: the `deepspeed` launcher is not on PATH; install it: {INSTALL}"
    return None


def versions() -> dict:
    name_accelerator("cuda" if torch.cuda.is_available() else "cpu")
    import deepspeed  # optional: only this backend needs DeepSpeed

    return {"deepspeed": deepspeed.__version__, "torch": torch.__version__}
