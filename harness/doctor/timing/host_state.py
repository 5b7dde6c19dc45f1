"""The machine's state around a GPU timing run, before and after each part.

The machine's state around a GPU timing run (harness/doctor/timing/gpu_timing.py): what can make a loop slower or
faster from outside it (GPU clocks, power, throttle reasons and other compute processes from nvidia-smi; CPU
affinity, cgroup quota, threads, load), read before and after each part, with each part's seconds
(OUT/host.json)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import torch


def smi(*query: str) -> list[dict]:
    """nvidia-smi --query-...=query as a list of dicts ([] without nvidia-smi)."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return []
    kind, fields = query[0], list(query[1:])
    out = subprocess.run(
        [exe, f"--query-{kind}={','.join(fields)}", "--format=csv,noheader,nounits"],
        capture_output=True,
        text=True,
        timeout=20,
    )
    if out.returncode != 0:
        return [{"error": out.stderr.strip()[-300:]}]
    return [dict(zip(fields, (v.strip() for v in line.split(",")))) for line in out.stdout.splitlines() if line]


def host_state(label: str) -> dict:
    """What can make a GPU loop slower or faster from outside it, now."""
    quota = Path("/sys/fs/cgroup/cpu.max")
    return {
        "when": label,
        "time": time.time(),
        "load_avg": os.getloadavg(),
        "cpu_affinity": sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "cpu_count": os.cpu_count(),
        "cpu_quota": quota.read_text().strip() if quota.exists() else "",
        "torch_threads": torch.get_num_threads(),
        "omp_num_threads": os.environ.get("OMP_NUM_THREADS", ""),
        "gpu": smi(
            "gpu",
            "name",
            "clocks.sm",
            "clocks.max.sm",
            "clocks.mem",
            "power.draw",
            "power.limit",
            "temperature.gpu",
            "utilization.gpu",
            "pstate",
            "clocks_throttle_reasons.active",
        ),
        "compute_apps": smi("compute-apps", "pid", "process_name", "used_memory"),
    }


class Parts:
    """Seconds each part took, and the machine's state after it (OUT/host.json)."""

    def __init__(self):
        self.t0 = time.monotonic()
        self.seconds: dict[str, float] = {}
        self.states = [host_state("start")]

    def run(self, name: str, fn, *args, state: bool = False):
        t = time.monotonic()
        out = fn(*args)
        self.seconds[name] = time.monotonic() - t
        if state:
            self.states.append(host_state(f"after {name}"))
        return out

    def write(self, out: Path) -> None:
        self.seconds["total"] = time.monotonic() - self.t0
        (out / "host.json").write_text(
            json.dumps({"states": self.states, "parts_s": self.seconds}, indent=1, default=str)
        )
