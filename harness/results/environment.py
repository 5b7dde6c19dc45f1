"""The environment table: what produced a run, and a fingerprint that refuses unlike comparisons.

The fingerprint hashes what changes performance regardless of the code under test: CPU model and
count, device kind/name/count, Python minor version, torch and backend library versions, and the number
of hosts. Host names and dates are recorded but not fingerprinted (CI runners change names).
"""

from __future__ import annotations

import datetime
import hashlib
import json
import os
import platform
import socket
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pandas as pd
import torch

from harness.schema import SCHEMA_VERSION

FINGERPRINT_KEYS = ("python", "torch", "cuda", "nccl", "horovod", "deepspeed", "byteps",
                    "device", "device_name", "device_count", "cpu_model", "cpu_count", "hosts")


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return ""


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def git_commit() -> str:
    try:
        root = Path(__file__).resolve().parents[2]
        out = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
                             timeout=5)
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=5).stdout.strip()
        return out.stdout.strip() + ("-dirty" if dirty else "") if out.returncode == 0 else ""
    except (OSError, subprocess.SubprocessError):
        return ""


def interfaces() -> str:
    try:
        return ",".join(sorted(os.listdir("/sys/class/net")))
    except OSError:
        return ""


def collect(run_id: str, device: str = "cpu", hosts: list[str] | None = None, extra: dict | None = None) -> dict:
    cuda = torch.cuda.is_available()
    row = {
        "schema_version": SCHEMA_VERSION, "run_id": run_id,
        "created_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "command": " ".join([Path(sys.argv[0]).name] + sys.argv[1:]),
        "git_commit": git_commit(),
        # the code the workers import: launch/local.py starts them with -P and this package first on
        # PYTHONPATH, so a stray harness/ in the working directory cannot shadow it
        "package_path": str(Path(__file__).resolve().parents[1]),
        "python": ".".join(map(str, sys.version_info[:2])),
        "torch": torch.__version__, "transformers": _version("transformers"),
        "cuda": torch.version.cuda or "", "nccl": "",
        "horovod": _version("horovod"), "deepspeed": _version("deepspeed"), "byteps": _version("byteps"),
        "device": device,
        "device_name": torch.cuda.get_device_name(0) if (cuda and device == "cuda") else cpu_model(),
        "device_count": torch.cuda.device_count() if device == "cuda" else (os.cpu_count() or 1),
        "cpu_model": cpu_model(), "cpu_count": os.cpu_count() or 1,
        "hosts": ",".join(sorted(set(hosts or [socket.gethostname()]))),
        "interfaces": interfaces(),
        "slurm_job_id": os.environ.get("SLURM_JOB_ID", ""),
        "slurm_nodelist": os.environ.get("SLURM_JOB_NODELIST", ""),
    }
    if cuda:
        try:
            row["nccl"] = ".".join(map(str, torch.cuda.nccl.version()))
        except Exception:  # built without nccl
            pass
    row.update(extra or {})
    row["fingerprint"] = fingerprint(row)
    return row


def fingerprint(row: dict) -> str:
    key = {k: str(row.get(k, "")) for k in FINGERPRINT_KEYS}
    key["hosts"] = str(len(str(row.get("hosts", "")).split(","))) if row.get("hosts") else "1"
    return hashlib.sha1(json.dumps(key, sort_keys=True).encode()).hexdigest()[:12]


def to_frame(row: dict) -> pd.DataFrame:
    return pd.DataFrame([row])
