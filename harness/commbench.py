"""Communication micro-benchmark (DESIGN section 3): all-reduce and push-pull over message sizes.

    ddlbench commbench --workers 2 --collective allreduce --min-size 4K --max-size 256M

Per size: warm-up, then `reps` timed repetitions, each preceded by a barrier and timed on every rank;
a repetition's time is the slowest rank's. algbw = size/time; busbw = algbw * 2(n-1)/n for all-reduce
(nccl-tests' convention), = algbw for push-pull. A least-squares fit t = alpha + beta*size over the
per-size medians is stored with the rows; `mgwfbp` can read it (knob commbench_run).

This module is also the rank entry point: `python -m harness.commbench --cell C.json --out DIR`.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import time
from pathlib import Path

import pandas as pd
import torch

from harness.cell import CellSpec
from harness.errors import UserError
from harness.measure.stats import busbw_factor
from harness.schema import COMMBENCH_COLUMNS, SCHEMA_VERSION
from harness.planning import fit_alpha_beta

UNITS = {"": 1, "B": 1, "K": 1 << 10, "KB": 1 << 10, "M": 1 << 20, "MB": 1 << 20, "G": 1 << 30, "GB": 1 << 30}
PART = 4 << 20  # push-pull partitions, as the PS schemes cut them


def parse_size(text: str | int) -> int:
    if isinstance(text, int):
        return text
    t = str(text).strip().upper()
    num = t.rstrip("KMGB")
    unit = t[len(num):]
    try:
        value = float(num) * UNITS[unit]
    except (ValueError, KeyError):
        raise UserError(f"size {text!r} is not a size: write e.g. 4K, 1M, 256M") from None
    if value < 4:
        raise UserError(f"size {text!r} is below one float32 (4 bytes)")
    return int(value)


def sizes_between(lo: int, hi: int, factor: int = 2) -> list[int]:
    if hi < lo:
        raise UserError(f"--max-size {hi} is below --min-size {lo}: swap them")
    out, s = [], lo
    while s <= hi:
        out.append(s)
        s *= factor
    return out


def _keys(sizes: list[int]) -> list[tuple[str, int]]:
    """Push-pull keys: one per size below a partition, else the partitions of the largest size."""
    keys = [(f"s{s}", s // 4) for s in sizes if s < PART]
    big = max(sizes)
    if big >= PART:
        keys += [(f"p{j}", PART // 4) for j in range(math.ceil(big / PART))]
    return keys


def run_rank(cell: CellSpec, out: Path) -> None:
    from harness.backends.torch_dist import _start
    from harness.launch.env import from_environ

    env = from_environ()
    kn = cell.knobs
    sizes, reps, warm, collective = kn["sizes"], kn["reps"], kn["warmup"], kn["collective"]
    if env.rank >= cell.workers:
        from harness.backends.torch_dist import _serve
        _serve(cell, env)
        return
    device = torch.device("cuda", env.local_rank) if cell.device == "cuda" else torch.device("cpu")
    t = _start(cell, env, device)
    if collective == "pushpull":
        t.declare_keys(_keys(sizes))
    big = torch.zeros(max(sizes) // 4, device=device)
    times: dict[int, list[float]] = {}
    for size in sizes:
        buf = big[: size // 4]
        samples = []
        for rep in range(warm + reps):
            t.barrier()
            t0 = time.perf_counter()
            if collective == "allreduce":
                t.allreduce_async(buf, "bench").wait()
            else:
                hs = []
                if size < PART:
                    hs.append(t.push_pull_async(buf, f"s{size}"))
                else:
                    for j in range(size // PART):
                        hs.append(t.push_pull_async(big[j * PART // 4:(j + 1) * PART // 4], f"p{j}"))
                for h in hs:
                    h.wait()
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            if rep >= warm:
                samples.append(time.perf_counter() - t0)
        times[size] = samples
    gathered = t.gather_object(times)
    t.shutdown()
    if env.rank == 0:
        result = {"times": {str(s): [max(g[s][i] for g in gathered) for i in range(reps)] for s in sizes},
                  "workers": cell.workers}
        (out / "result.json").write_text(json.dumps(result))


def rows(run_id: str, cell: CellSpec, result: dict) -> pd.DataFrame:
    n = cell.workers
    coll = cell.knobs["collective"]
    factor = busbw_factor("allreduce" if coll == "allreduce" else coll, n)
    out = []
    med_sizes, med_times = [], []
    for size_s, samples in result["times"].items():
        size = int(size_s)
        med_sizes.append(size)
        med_times.append(statistics.median(samples))
        for rep, t in enumerate(samples):
            alg = size * 8 / t / 1e9
            out.append({"schema_version": SCHEMA_VERSION, "run_id": run_id, "collective": coll,
                        "backend": cell.backend, "workers": n, "size_bytes": size, "rep": rep, "time_s": t,
                        "algbw_gbit_s": alg, "busbw_gbit_s": alg * factor, "network": cell.network})
    alpha, beta = fit_alpha_beta([float(s) for s in med_sizes], med_times) if len(med_sizes) > 1 else (0.0, 0.0)
    df = pd.DataFrame(out)
    df["fit_alpha_s"], df["fit_beta_s_per_byte"] = alpha, beta
    return df[COMMBENCH_COLUMNS]


def fit_from_run(run: str | Path, collective: str = "allreduce", workers: int | None = None) -> tuple[float, float]:
    """(alpha_s, beta_s_per_byte) stored by a commbench run."""
    from harness.results.store import load_run

    cb = load_run(run).commbench
    if cb.empty:
        raise UserError(f"run {run} has no commbench table: run `ddlbench commbench --output {run}` first")
    sel = cb[cb["collective"] == collective]
    if workers is not None and (sel["workers"] == workers).any():
        sel = sel[sel["workers"] == workers]
    if sel.empty:
        raise UserError(f"run {run} has no {collective} measurements")
    return float(sel["fit_alpha_s"].iloc[0]), float(sel["fit_beta_s_per_byte"].iloc[0])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m harness.commbench")
    ap.add_argument("--cell", required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args(argv)
    cell = CellSpec.from_json(Path(a.cell).read_text())
    if cell.device == "cpu":
        torch.set_num_threads(cell.threads)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    run_rank(cell, out)
    return 0


if __name__ == "__main__":
    from harness.training import exit_now

    exit_now(main())
