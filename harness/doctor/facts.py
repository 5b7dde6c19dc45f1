"""What this machine offers, as plain data for `ddlbench doctor` (its report and its --json).

    collect()   # {"python": {...}, "torch": {...}, "gpus": {...}, "network": {...}, "backends": [...],
                #  "slurm": {...}, "testbed": {...}, "deepspeed_ops": {...}}

Each collector answers for one subject and never raises for a missing tool, library or permission: the
doctor runs first on machines where things are missing, and what is missing is the answer.
"""

from __future__ import annotations

import os
import platform
import shutil
import sys
from pathlib import Path

import torch
import torch.distributed as dist

from harness import backends
from harness.backends.deepspeed import extensions_dir
from harness.contracts.hostlist import expand_hostlist, expand_tasks_per_node
from harness.core.errors import UserError
from harness.doctor.network import hostname_facts, interfaces, run_tool
from harness.results.environment import cpu_model
from harness.testbed import netns
from harness.testbed.checks import check_system

SLURM_TOOLS = ("sinfo", "scontrol", "srun", "sbatch")


def python_facts() -> dict:
    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return {
        "version": platform.python_version(),
        "executable": sys.executable,
        "platform": platform.platform(),
        "cpu_model": cpu_model(),
        "cores": cores,
        "load_avg": [round(x, 2) for x in load] if load else None,
    }


def torch_facts() -> dict:
    """torch's version and build: CUDA or CPU, cuDNN, NCCL (when compiled in), distributed backends."""
    nccl = None
    if torch.cuda.is_available():
        try:
            nccl = ".".join(map(str, torch.cuda.nccl.version()))
        except (AttributeError, RuntimeError):  # a build without NCCL
            nccl = None
    cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    return {
        "version": torch.__version__,
        "cuda_build": torch.version.cuda,
        "cuda_available": torch.cuda.is_available(),
        "cudnn": cudnn,
        "nccl": nccl,
        "distributed": {
            "gloo": dist.is_gloo_available(),
            "nccl": dist.is_nccl_available(),
            "mpi": dist.is_mpi_available(),
        },
    }


def gpu_facts() -> dict:
    """CUDA devices as torch sees them, the driver, and `nvidia-smi topo -m` (how GPUs and NICs connect:
    NVLink, PCIe switch, host bridge) when nvidia-smi exists."""
    devices = []
    if torch.cuda.is_available():
        for i in range(torch.cuda.device_count()):
            p = torch.cuda.get_device_properties(i)
            devices.append(
                {
                    "index": i,
                    "name": p.name,
                    "memory_gib": round(p.total_memory / 2**30, 1),
                    "compute_capability": f"{p.major}.{p.minor}",
                }
            )
    smi = shutil.which("nvidia-smi")
    driver = run_tool(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"]) if smi else None
    return {
        "count": len(devices),
        "devices": devices,
        "nvidia_smi": smi,
        "nvidia_hardware": nvidia_hardware(),
        "driver": driver.splitlines()[0].strip() if driver else None,
        "topology": run_tool(["nvidia-smi", "topo", "-m"]) if smi else None,
        "visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
    }


NVIDIA_SIGNS = ("/proc/driver/nvidia/version", "/dev/nvidia0", "/dev/nvidiactl")
"""Files the NVIDIA kernel driver makes: an NVIDIA GPU is installed whatever torch sees."""


def nvidia_hardware(signs=NVIDIA_SIGNS) -> bool:
    """Whether this machine has an NVIDIA GPU and its driver (independent of torch's build)."""
    return shutil.which("nvidia-smi") is not None or any(Path(f).exists() for f in signs)


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


def backend_facts(device: str) -> list[dict]:
    """Every registered backend: usable here or why not, its versions (for Horovod also the controllers
    and collectives it was built with) and whether it runs cells on `device`."""
    out = []
    for name, entry in backends.load().items():
        row = {"name": name, "available": False, "reason": None, "versions": {}, "device_reason": None}
        try:
            row["reason"] = entry.available()
        except Exception as e:  # a broken install must not stop the doctor: it is what the doctor reports
            row["reason"] = f"backend {name}: checking it raised {type(e).__name__}: {_first_line(e)}"
        row["available"] = row["reason"] is None
        if row["available"]:
            try:
                row["versions"] = entry.versions()
                row["device_reason"] = entry.device_check(device)
            except Exception as e:  # same: report it
                row["device_reason"] = f"backend {name} is importable but failed: {_first_line(e)}"
        out.append(row)
    return out


def slurm_facts(environ=os.environ) -> dict:
    """Inside an allocation or not (SLURM_JOB_ID), its nodes and tasks per node, and the Slurm tools."""
    nodelist = environ.get("SLURM_JOB_NODELIST") or environ.get("SLURM_NODELIST")
    try:
        nodes = expand_hostlist(nodelist) if nodelist else []
    except ValueError:
        nodes = []
    try:
        tasks = expand_tasks_per_node(environ["SLURM_TASKS_PER_NODE"]) if environ.get("SLURM_TASKS_PER_NODE") else []
    except ValueError:
        tasks = []
    return {
        "in_allocation": bool(environ.get("SLURM_JOB_ID")),
        "job_id": environ.get("SLURM_JOB_ID"),
        "nodelist": nodelist,
        "nodes": nodes,
        "tasks_per_node": tasks,
        "gpus_per_node": environ.get("SLURM_GPUS_PER_NODE") or environ.get("SLURM_GPUS_ON_NODE"),
        "tools": {t: shutil.which(t) for t in SLURM_TOOLS},
    }


def testbed_facts() -> dict:
    """The emulated testbed: up or not, who holds it, and whether one could be built here (root, tools)."""
    try:
        check_system()
        can_build = None
    except UserError as e:
        can_build = str(e)
    try:
        state = netns.status()
        holder = netns.lease_holder()
    except (OSError, UserError) as e:
        return {
            "up": False,
            "hosts": 0,
            "rate_mbit": None,
            "held_by": None,
            "cannot_build": can_build,
            "error": _first_line(e),
        }
    return {
        "up": state is not None,
        "hosts": len(state.hosts) if state else 0,
        "rate_mbit": state.rate_mbit if state else None,
        "held_by": holder,
        "cannot_build": can_build,
    }


def deepspeed_ops_facts() -> dict:
    """DeepSpeed's compiled-ops folder (TORCH_EXTENSIONS_DIR as the harness sets it for every rank) and the
    ops built there (a folder holding a shared library); ops missing there are compiled on first use,
    which can take minutes inside a timed cell."""
    folder = Path(extensions_dir())
    ops = sorted(p.name for p in folder.iterdir() if p.is_dir() and any(p.glob("*.so"))) if folder.is_dir() else []
    return {"folder": str(folder), "exists": folder.is_dir(), "built_ops": ops}


def collect(device: str) -> dict:
    """Every fact above, for cells on `device` (cpu | cuda)."""
    return {
        "python": python_facts(),
        "torch": torch_facts(),
        "gpus": gpu_facts(),
        "network": {"interfaces": interfaces(), "hostname": hostname_facts()},
        "backends": backend_facts(device),
        "slurm": slurm_facts(),
        "testbed": testbed_facts(),
        "deepspeed_ops": deepspeed_ops_facts(),
        "device": device,
    }
