"""The GPU report's time budget: the seconds left, and what each check is expected to take.

The GPU report's time budget (README, "GPUs"): the seconds left, and what each check is expected to take,
estimated from the committed GPU runs before anything runs and from this machine's own iteration times once
round A has measured them. A check whose estimate exceeds the time left is reported
`NOT RUN: no time left (needs about N s)`, never dropped (harness/doctor/timing/summary.py).

Sources (one NVIDIA H200, 16 cores): reports/gpu/2026-11-26-h200-after/ (README, parts.txt, timing/host.json:
doctor 14 s, correctness 44 s with -n 8, phase checks about 60 s, build 11 s, round A 53 s, the 8-cell sweep
54 s, kernels 6 s, profiles and the predicted table 41 s) and the run of main at 9ec12c3 (issue 39: doctor
43 s with DeepSpeed's smoke cell 37 s, correctness 67 s). Where two runs differ the longer is taken.
"""

from __future__ import annotations

import time

DEFAULT_BUDGET_S = 420.0
"""Both parts of scripts/gpu_report.sh, correctness included: one GPU lease is 15 minutes of device time, 10
per command, and a machine takes minutes to start."""
RESERVE_S = 10.0
"""Kept back at the end for writing the summary and packing details.tar.gz."""

ESTIMATE_S = {
    "doctor": 45.0,  # 43 s and 14 s
    "correctness": 70.0,  # 67 s and 44 s with -n 8
    "event phases": 60.0,  # "about 60 s"
    "build": 11.0,  # the four study models on the GPU
    "kernels": 6.0,  # one profiled iteration per case
    "prediction": 20.0,  # the study's table from three profiles (coarse intervals): 41 s less the profiles
}
"""Seconds per check or stage, from the runs above."""

CELL_OVERHEAD_S = 4.8
"""Seconds a harness cell costs beyond its iterations in the warm sweep (process, model, FLOP count, result):
(54 s - 8 cells x 40 iterations x their median iterations, 15.8 s) / 8."""
PROCESS_START_S = 8.0
"""Seconds one side of a CPU pair costs beyond its iterations (harness/doctor/timing/cpu_pairs.py: a bare loop's process
importing torch and building its model, or a warm rank forking and building it). An estimate: `ddlbench run`
of bert-base-tiny on the project's 2-core box took about 7 s beyond its iterations (issue 39)."""
PROFILE_OVERHEAD_S = 6.0
"""Seconds a profile costs beyond its iterations (model build, FLOPs counted on a meta copy)."""

ITER_S = {
    ("resnet50", "fp32"): 0.077,
    ("resnet50", "bf16"): 0.029,
    ("bert-base", "fp32"): 0.067,
    ("bert-base", "bf16"): 0.035,
    ("bert-large", "fp32"): 0.052,
    ("bert-large", "bf16"): 0.072,
    ("gpt2-small", "fp32"): 0.084,
    ("gpt2-small", "bf16"): 0.038,
}
"""Median iteration of each study case's harness cell on the H200 (the longer of the two runs)."""
UNKNOWN_ITER_S = 0.3
"""An iteration of a case not above (a tiny workload on a CPU: bert-base-tiny about 0.26 s on 2 cores), until
round A has measured it."""


def iter_s(case: tuple[str, str], measured: dict | None = None) -> float:
    """Seconds per iteration of (workload, dtype): measured here when it has been, else the table's."""
    if measured and case in measured:
        return measured[case]
    return ITER_S.get(case, UNKNOWN_ITER_S)


def loop_s(cases: list, iterations: int, measured: dict | None = None) -> float:
    """Seconds for `iterations` of every case in turn."""
    return sum(iterations * iter_s(c, measured) for c in cases)


class Budget:
    """The seconds left until `deadline_unix` (time.time()), less RESERVE_S."""

    def __init__(self, deadline_unix: float, reserve_s: float = RESERVE_S):
        self.deadline_unix = deadline_unix
        self.reserve_s = reserve_s

    @classmethod
    def of(cls, seconds: float, reserve_s: float = RESERVE_S) -> Budget:
        return cls(time.time() + seconds, reserve_s)

    def left(self) -> float:
        return self.deadline_unix - self.reserve_s - time.time()

    def fits(self, estimate_s: float) -> bool:
        return estimate_s <= self.left()
