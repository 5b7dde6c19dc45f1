"""The environment table: what produced a run, the load it saw, and what the gate compares.

What can change a cell's numbers regardless of the code under test (docs/ARCHITECTURE.md, "Regression
gate"): COMMON_KEYS (CPU model and count, device kind/name/count, GPU driver and topology, Python minor
version, torch, CUDA, NCCL, the number of hosts) and the version of the cell's own backend library: the
column named after the backend (each backend names its library, BackendEntry.library; the row's
`libraries` lists the columns; torch's is common). `fingerprint_keys(backend)` is that set; the gate
compares those values, not a hash. The `fingerprint` column hashes every key (a run's short label). The
keys and their compared form live in harness/results/fingerprints.py, which needs no torch. Host names and dates are
recorded but not compared (CI runners change names).

The machine's load at the start and end of a run, and in its busiest window (harness/results/machine_load.py),
is recorded here too.
"""

from __future__ import annotations

import contextlib
import datetime
import os
import platform
import socket
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pandas as pd
import torch

from harness.core.atomic import write_parquet_atomic
from harness.core.schema import SCHEMA_VERSION
from harness.results import gpu_env, machine_load
from harness.results.files import read_table
from harness.results.fingerprints import (
    fingerprint,
    fingerprint_keys,  # noqa: F401
)


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
        out = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5)
        dirty = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=5,
        ).stdout.strip()
        return out.stdout.strip() + ("-dirty" if dirty else "") if out.returncode == 0 else ""
    except (OSError, subprocess.SubprocessError):
        return ""


def interfaces() -> str:
    try:
        return ",".join(sorted(os.listdir("/sys/class/net")))
    except OSError:
        return ""


def collect(
    run_id: str,
    device: str = "cpu",
    hosts: list[str] | None = None,
    extra: dict | None = None,
    sample_load: bool = True,
    libraries: dict | None = None,
) -> dict:
    """The environment row of a run; with `sample_load`, the machine's load now (takes about 1 s).
    `libraries`: backend -> the distribution whose installed version goes in the column named after the
    backend ("" when not installed), as the backends declare them (harness/experiment/execute.py asks)."""
    cuda = torch.cuda.is_available()
    row = {
        "schema_version": SCHEMA_VERSION,
        "run_id": run_id,
        "created_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "command": " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]),
        "git_commit": git_commit(),
        # the code the workers import: the spawner (harness/spawner/cell.py) starts them with -P and this package first
        # on PYTHONPATH, so a stray harness/ in the working directory cannot shadow it
        "package_path": str(Path(__file__).resolve().parents[1]),
        "python": ".".join(map(str, sys.version_info[:2])),
        "torch": torch.__version__,
        "transformers": _version("transformers"),
        "cuda": torch.version.cuda or "",
        "nccl": "",
        **{name: _version(dist) for name, dist in sorted((libraries or {}).items())},
        "libraries": ",".join(sorted(libraries or {})),
        "device": device,
        "device_name": torch.cuda.get_device_name(0) if (cuda and device == "cuda") else cpu_model(),
        "device_count": torch.cuda.device_count() if device == "cuda" else (os.cpu_count() or 1),
        "cpu_model": cpu_model(),
        "cpu_count": os.cpu_count() or 1,
        "hosts": ",".join(sorted(set(hosts or [socket.gethostname()]))),
        "interfaces": interfaces(),
        "slurm_job_id": os.environ.get("SLURM_JOB_ID", ""),
        "slurm_nodelist": os.environ.get("SLURM_JOB_NODELIST", ""),
    }
    if cuda:
        with contextlib.suppress(Exception):  # built without nccl
            row["nccl"] = ".".join(map(str, torch.cuda.nccl.version()))
    row.update(gpu_env.collect(device))  # driver, cuDNN, topology, NCCL_*, precision, GPU models ('' on CPU)
    row.update(extra or {})
    row["fingerprint"] = fingerprint(row)
    if sample_load:
        row.update(machine_load.sample("start"))
    return row


def record_load(run_dir: Path, columns: dict, merge: bool = False) -> None:
    """Set the machine-load columns (harness/results/machine_load.py) of the run's environment row
    (rewritten atomically); with `merge`, combined with those a resumed run's first invocation recorded
    (machine_load.merge_resumed)."""
    path = Path(run_dir) / "environment.parquet"
    if not path.exists():
        return
    environment = read_table(path)
    if merge:
        columns = machine_load.merge_resumed(environment.iloc[0].to_dict(), columns)
    for k, v in columns.items():
        environment[k] = v
    write_parquet_atomic(environment, path)


def to_frame(row: dict) -> pd.DataFrame:
    return pd.DataFrame([row])
