"""Backend `deepspeed`: the ZeRO schemes (zero0..zero3) run inside a DeepSpeed engine.

Launch: the `deepspeed` launcher, as DeepSpeed users start a job on one box
(`deepspeed --num_gpus W --master_port P --no_local_rank --module harness.worker --cell ... --out ...`;
on a CPU box --num_gpus is the number of local processes). It sets RANK/WORLD_SIZE/LOCAL_RANK/MASTER_*
for every rank, which harness.launch.env reads, and `deepspeed.init_distributed(dist_backend="gloo")`
joins them. --no_local_rank: our worker takes its rank from the environment, not from --local_rank.
(The generic launchers would work too, since init_distributed reads the same variables: Slurm uses that.)

DeepSpeed JIT-compiles C++ ops on first use into TORCH_EXTENSIONS_DIR; we use the folder
scripts/install_frameworks.sh pre-compiled them into (same default, computed the same way).

The Transport (barrier, objects, all-reduce) is torch.distributed on the group DeepSpeed initialised:
the ZeRO schemes do their gradient communication inside the engine, not through it.
"""

from __future__ import annotations

import datetime
import functools
import os
import sys
from pathlib import Path

import torch

from harness.backends.base import BACKENDS, BackendEntry
from harness.backends.torch_dist import TorchTransport

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


def _start(cell, env, device):
    os.environ.setdefault("TORCH_EXTENSIONS_DIR", extensions_dir())
    import deepspeed

    deepspeed.init_distributed(dist_backend="nccl" if str(device).startswith("cuda") else "gloo",
                               timeout=datetime.timedelta(seconds=max(30.0, float(cell.timeout_s))),
                               verbose=False)
    return TorchTransport(cell, env, torch.device(device))


@functools.lru_cache(maxsize=1)
def _available() -> str | None:
    import importlib.util

    if importlib.util.find_spec("deepspeed") is None:
        return f"backend deepspeed is not installed here; install it: {INSTALL}"
    import shutil
    from harness.launch.horovodrun import launcher_exe

    if shutil.which(launcher_exe("deepspeed")) is None:
        return f"backend deepspeed: the `deepspeed` launcher is not on PATH; install it: {INSTALL}"
    return None


def _versions() -> dict:
    import deepspeed

    return {"deepspeed": deepspeed.__version__, "torch": torch.__version__}


def launch_deepspeed(cell, cell_dir, placement=None):
    from harness.launch.horovodrun import base_env, launcher_exe, prepare, run_supervised, worker_argv
    from harness.launch.local import free_port

    cell_dir = prepare(cell, cell_dir, placement)
    argv = [launcher_exe("deepspeed"), "--num_gpus", str(cell.workers), "--master_port", str(free_port()),
            "--no_local_rank", "--module"] + worker_argv(cell_dir)[1:]  # `--module harness.worker ...`
    env = base_env(cell, "deepspeed", {"TORCH_EXTENSIONS_DIR": extensions_dir()})
    return run_supervised(argv, env, cell, cell_dir, "deepspeed launcher")


BACKENDS.register("deepspeed", BackendEntry(
    name="deepspeed",
    description="DeepSpeed engine (ZeRO stages 0-3; gloo on CPU), started by the deepspeed launcher",
    start=_start, available=_available, versions=_versions, launch=launch_deepspeed,
))
