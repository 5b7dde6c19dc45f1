"""What the GPU timing check times: the bare loop's rounds, their variants, the cells, the kernels.

What the GPU timing check times (harness/doctor/timing/gpu_timing.py), each model built once in its process: the bare
loop's rounds, the variants that explain a difference, the harness's `local` cells as one warm sweep in a child
process, and the kernels one iteration runs.

Variants (`VARIANTS`, timed one after another within a round): the bare loop; the bare loop with one CPU thread
(as ranks run: OMP_NUM_THREADS=1); the bare loop with a device synchronisation per iteration (what the harness's
loop did before it read its events after the window); the harness's own loop (harness/measure/loop.py) called
in this process.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
from pathlib import Path

import pandas as pd
import torch

from harness.contracts.training import make_optimizer
from harness.doctor.timing.bare_loop import Bare
from harness.measure.loop import run_loop
from harness.schemes import SCHEMES, SchemeContext

ROOT = Path(__file__).resolve().parents[3]
VARIANTS = ("bare", "bare-1-thread", "bare-sync-per-iteration", "harness-loop-in-process")
EXTRA_SHARE = 2 / 3
"""Each variant beside the plain bare loop times this share of --iters: the plain loop is the reference, the
variants explain it."""


class InProcessHarness:
    """The harness's timing loop and `local` scheme around an already built model (no process, no group)."""

    def __init__(self, bare: Bare):
        entry = SCHEMES.get("local")
        self.bare = bare
        self.scheme = entry.cls(
            SchemeContext(
                transport=None,
                rank=0,
                workers=1,
                device=bare.device,
                knobs=entry.make_knobs(None),
                make_optimizer=make_optimizer,
                dtype=bare.dtype,
            )
        )
        self.fwd = self.scheme.setup(bare.model)

    def time(self, warmup: int, iters: int) -> dict:
        samples = run_loop(
            self.fwd, self.scheme, self.bare.loss, self.bare.data, warmup, iters, self.bare.device, lambda: None
        )
        t = statistics.median(s["iter_s"] for s in samples)
        return {
            "iter_s": t,
            "throughput": self.bare.batch / t,
            "host_issue_s": statistics.median(s["host_issue_s"] for s in samples),
            "device_lag_s": statistics.median(s["device_lag_s"] for s in samples),
        }


def _row(name: str, wl: str, dtype: str, variant: str, iters: int, r: dict) -> dict:
    print(f"[gpu_timing] {name} {wl:14s} {dtype} {variant:26s} {r['throughput']:9.1f}/s", flush=True)
    return {
        "round": name,
        "workload": wl,
        "dtype": dtype,
        "variant": variant,
        "iters": iters,
        "iter_s": r["iter_s"],
        "per_s": r["throughput"],
        "host_issue_s": r.get("host_issue_s"),
        "device_lag_s": r.get("device_lag_s"),
    }


def bare_round(
    name: str, models: dict, cases: list, warmup: int, iters: int, reverse: bool = False, threads: int | None = None
) -> list[dict]:
    """The bare loop of every case once (in reverse order for the round after the harness)."""
    rows = []
    for wl, dtype in cases[::-1] if reverse else cases:
        r = models[wl].use(dtype).time(warmup, iters, threads=threads)
        rows.append(_row(name, wl, dtype, "bare", iters, r))
    return rows


def variant_round(name: str, models: dict, harness: dict, cases: list, warmup: int, iters: int) -> list[dict]:
    """Every variant of each case, one after another: what explains a case that failed or drifted."""
    rows = []
    for wl, dtype in cases:
        bare = models[wl].use(dtype)
        for v in VARIANTS:
            n = iters if v == "bare" else max(1, round(iters * EXTRA_SHARE))
            if v == "harness-loop-in-process":
                r = harness[wl].time(warmup, n)
            else:
                r = bare.time(
                    warmup, n, threads=1 if v == "bare-1-thread" else None, sync_each=v == "bare-sync-per-iteration"
                )
            rows.append(_row(name, wl, dtype, v, n, r))
    return rows


def harness_cells(out: Path, cases: list, device: str, warmup: int, iters: int, timeout_s: float) -> pd.DataFrame:
    """The harness's `local` cells as a user runs them: one warm sweep (child processes), in OUT/sweep/."""
    workloads = list(dict.fromkeys(wl for wl, _ in cases))
    dtypes = list(dict.fromkeys(d for _, d in cases))
    sweep = out / "sweep.yaml"
    sweep.write_text(
        f"name: gpu-timing\nworkloads: [{', '.join(workloads)}]\nschemes: [local]\nworkers: [1]\n"
        f"dtype: [{', '.join(dtypes)}]\nwarmup: {warmup}\niters: {iters}\ndevice: {device}\n"
        f"timeout_s: 900\n"
    )
    run = out / "sweep"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    with open(out / "sweep.log", "w") as log:
        subprocess.run(
            [
                sys.executable,
                "-m",
                "harness.cli.main",
                "sweep",
                str(sweep),
                "--output",
                str(run),
                "--no-progress",
                "--overwrite",
            ],
            check=True,
            cwd=ROOT,
            env=env,
            timeout=timeout_s,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    cells = pd.read_parquet(run / "summary.parquet")
    wanted = set(cases)
    return cells[[(w, d) in wanted for w, d in zip(cells["workload"], cells["dtype"])]]


def kernels(models: dict, cases: list) -> list[dict]:
    """Kernels (and copies, sets) the device ran for one bare iteration, and the host's operations for it."""
    from torch.profiler import (  # heavy, and only here: imported on use
        ProfilerActivity,
        profile,
    )

    rows = []
    for wl, dtype in cases:
        bare = models[wl].use(dtype)
        acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if bare.device.type == "cuda" else [])
        bare.step()
        bare.sync()
        with profile(activities=acts) as prof:
            bare.step()
            bare.sync()
        events = prof.events()
        device_ops = [e for e in events if getattr(e, "device_type", None) == torch.autograd.DeviceType.CUDA]
        cpu_ops = [e for e in events if getattr(e, "device_type", None) == torch.autograd.DeviceType.CPU]
        rows.append(
            {"workload": wl, "dtype": dtype, "device_ops_per_iter": len(device_ops), "cpu_ops_per_iter": len(cpu_ops)}
        )
    return rows
