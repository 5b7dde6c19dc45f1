"""Harness against bare loop in alternated pairs, for a cell whose bare loop drifted between rounds.

Harness against bare loop, paired, for a cell whose bare loop drifted between its rounds
(harness/doctor/timing/gpu_timing.py). On a host-bound GPU cell the host's pace moved 15-28% between two rounds a
minute apart (reports/gpu/2026-11-26-h200-after), every loop with it, so a harness cell measured in its own
process between two bare rounds cannot be judged to 0.5%. What can: the harness's own loop called in the
same process, alternated with the bare loop on the same model in short pairs (bare-harness, then
harness-bare, ...: a drift that is slow against one pair cancels in each pair's ratio and a linear one in
every two), judged on the median of the pairs' ratios. The cell in its process and the in-process loop run
the same loop (harness/measure/loop.py); the pairs decide whether that loop slows the workload, the cell's
unpaired ratio stays in the table beside them.
"""

from __future__ import annotations

import statistics

import pandas as pd

PAIRS = 6
"""Pairs per drifting case: six alternations, 12 short timings (about 7 s for bert-large at batch 8 on an
H200)."""
PAIR_DISPERSION = 0.02
"""The pairs' ratios may scatter (interquartile range over median) by at most this for the median to be
decided: a drift faster than one pair leaves the case undecided still."""


def pair_rounds(bare, harness, warmup: int, iters: int, pairs: int = PAIRS) -> list[dict]:
    """`pairs` alternations of bare.time and harness.time (each `.time(warmup, iters)` -> {"throughput": ...}),
    the order flipped every pair; a row per pair with both throughputs and their ratio."""
    rows = []
    for i in range(pairs):
        first = "bare" if i % 2 == 0 else "harness"
        if first == "bare":
            b = bare.time(warmup, iters)["throughput"]
            h = harness.time(warmup, iters)["throughput"]
        else:
            h = harness.time(warmup, iters)["throughput"]
            b = bare.time(warmup, iters)["throughput"]
        rows.append({"pair": i, "first": first, "bare_per_s": b, "harness_per_s": h, "ratio": h / b})
    return rows


def summarise(ratios: list[float]) -> tuple[float, float]:
    """(median ratio, dispersion: interquartile range over the median) of one case's pairs."""
    med = statistics.median(ratios)
    if len(ratios) < 4:
        return med, (max(ratios) - min(ratios)) / med
    q = statistics.quantiles(ratios, n=4, method="inclusive")
    return med, (q[2] - q[0]) / med


def decide(ratio: float, dispersion: float, low: float, high: float) -> str:
    """`ok`, `FAILED` or `undecided` (the pairs scatter more than PAIR_DISPERSION) for a paired median."""
    if dispersion > PAIR_DISPERSION:
        return "undecided"
    return "ok" if low <= ratio <= high else "FAILED"


def bare_rounds(variants: pd.DataFrame) -> dict:
    """(workload, dtype) -> the bare loop's throughput in round A and in round B."""
    bare = variants[variants["variant"] == "bare"]
    return {
        (wl, dtype): (float(b[b["round"] == "A"]["per_s"].iloc[0]), float(b[b["round"] == "B"]["per_s"].iloc[0]))
        for (wl, dtype), b in bare.groupby(["workload", "dtype"], sort=False)
    }


def spread(before: float, after: float) -> float:
    """How far the bare loop moved between its rounds, as a share of the faster."""
    return abs(before - after) / max(before, after)


def spreads(variants: pd.DataFrame) -> dict:
    """(workload, dtype) -> `spread` of its bare rounds."""
    return {case: spread(a, b) for case, (a, b) in bare_rounds(variants).items()}


def paired(models: dict, harness: dict, cases: list, warmup: int, iters: int) -> pd.DataFrame:
    """harness/doctor/timing/paired.py for each case given: the harness's loop in-process alternated with the bare
    loop."""
    rows = []
    for wl, dtype in cases:
        bare = models[wl].use(dtype)
        for r in pair_rounds(bare, harness[wl], warmup, iters):
            rows.append({"workload": wl, "dtype": dtype, **r})
            print(
                f"[gpu_timing] pair {wl:12s} {dtype} {r['pair']} {r['first']:8s} harness/bare {r['ratio']:.3f}",
                flush=True,
            )
    return pd.DataFrame(rows, columns=["workload", "dtype", "pair", "first", "bare_per_s", "harness_per_s", "ratio"])
