"""Harness against bare loop on a CPU, in alternated pairs of processes (the timing check's CPU mode).

Harness against bare loop on a CPU, in alternated pairs of processes (the GPU timing check's CPU mode,
harness/doctor/timing/gpu_timing.py --device cpu): the harness's `local` cell as a user runs it (a rank process started
warm, as `ddlbench run` starts it: harness/spawner/cell.py) against the bare loop in a process of
its own (`python -m harness.doctor.timing.bare_loop --threads 1`: one thread, as a CPU rank runs), alternated
bare-cell, cell-bare, ... (harness/doctor/timing/paired.py). Each side's number is its median iteration, so process
start-up is not in it; what is: everything that makes the rank's iterations slower than a hand-written loop's
(the loop's own work, the rank's process state), so a regression of the CPU loop (issue 39: 5% since 6791659)
cannot return unseen. The process state matters on a CPU: a bert-base-tiny iteration takes 57,000-76,000 minor
page faults (its four 62.5 MB vocabulary-sized tensors are above glibc's 32 MB mmap ceiling and mapped afresh
each iteration, and the heap's top is trimmed and regrown), a count that moves by 10-15% from one process to
the next, and was about 7% higher in warm (forked) ranks at 9ec12c3 than at 6791659 (cold ranks: no difference;
counted with perf and getrusage, which do not depend on load).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

import pandas as pd

from harness.contracts.cell import CellSpec
from harness.doctor.timing.paired import pair_rounds
from harness.experiment.cells import resolve
from harness.spawner.cell import launch_cell
from harness.warm.spawn import warm_ranks

ROOT = Path(__file__).resolve().parents[3]


class CellProcess:
    """One `local` cell of (workload, dtype) on the CPU, one worker, one thread; `.time` runs it again."""

    def __init__(self, case: tuple[str, str], out: Path):
        self.case, self.out, self.runs = case, out, 0

    def time(self, warmup: int, iters: int) -> dict:
        wl, dtype = self.case
        cell = resolve(
            CellSpec(
                workload=wl,
                scheme="local",
                workers=1,
                device="cpu",
                dtype=dtype,
                warmup=warmup,
                iters=iters,
                threads=1,
                timeout_s=900,
            )
        )
        self.runs += 1
        result = json.loads(launch_cell(cell, self.out / f"{wl}.{dtype}.{self.runs}").read_text())
        samples = result["ranks"][0]["samples"]
        t = statistics.median(s["iter_s"] for s in samples)
        return {"iter_s": t, "throughput": cell.batch / t}


class BareProcess:
    """The bare loop of (workload, dtype) in a fresh process with one thread; `.time` starts another."""

    def __init__(self, case: tuple[str, str]):
        self.case = case

    def time(self, warmup: int, iters: int) -> dict:
        wl, dtype = self.case
        env = {
            **os.environ,
            "OMP_NUM_THREADS": "1",
            "MKL_NUM_THREADS": "1",
            "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
        }
        out = subprocess.run(
            [
                sys.executable,
                "-m",
                "harness.doctor.timing.bare_loop",
                "--workload",
                wl,
                "--dtype",
                dtype,
                "--device",
                "cpu",
                "--threads",
                "1",
                "--warmup",
                str(warmup),
                "--iters",
                str(iters),
                "--json",
            ],
            check=True,
            capture_output=True,
            text=True,
            cwd=ROOT,
            env=env,
            timeout=900,
        )
        r = json.loads(out.stdout.strip().splitlines()[-1])
        return {"iter_s": r["iter_s_median"], "throughput": r["batch"] / r["iter_s_median"]}


def process_pairs(cases: list, out: Path, warmup: int, iters: int, pairs: int) -> pd.DataFrame:
    """`pairs` alternations of the cell's process and the bare loop's for each case; a row per pair."""
    rows = []
    with warm_ranks():
        for case in cases:
            for r in pair_rounds(BareProcess(case), CellProcess(case, out), warmup, iters, pairs):
                rows.append({"workload": case[0], "dtype": case[1], **r})
                print(
                    f"[gpu_timing] cpu pair {case[0]:14s} {case[1]} {r['pair']} {r['first']:8s} harness/bare "
                    f"{r['ratio']:.3f}",
                    flush=True,
                )
    return pd.DataFrame(rows, columns=["workload", "dtype", "pair", "first", "bare_per_s", "harness_per_s", "ratio"])
