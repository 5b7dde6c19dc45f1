"""Warm ranks against cold ones on this box (docs/ARCHITECTURE.md, "Warm ranks"): the same sweep run
ROUNDS times each way, alternated (W C, C W, W C, ...), on a quiet machine; then the regression gate over
rounds (`ddlbench compare`, the cold runs as the baseline) and the cost of starting cells.

    python scripts/reports/warm_vs_cold.py run            # sweeps/quick.yaml, 3 rounds; results/warm-vs-cold/
    python scripts/reports/warm_vs_cold.py table          # the report again from the stored runs
    python scripts/reports/warm_vs_cold.py run --under "salloc -N2 --ntasks-per-node=1 --time=30" \
        --sweep slurm/sweeps/cpu-tiny.yaml --rounds 2 --results results/warm-vs-cold-slurm \
        --out reports/warm-vs-cold-slurm           # the same inside a Slurm allocation (srun launcher)
    python scripts/reports/warm_vs_cold.py one --before ../old-checkout   # a one-iteration `ddlbench run`, timed

Writes reports/warm-vs-cold/: README.md (the gate's verdict table, per-run wall, measured share, fixed
cost per cell, start-up per cell), runs/<run>/{summary,environment}.parquet, gate.txt. Per cell:
fixed cost = its wall time in the driver (`wall_s`) minus the time of its warm-up and measured
iterations (rank 0's, from raw.parquet); measured share = measured iterations / sweep wall.
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

from harness.results.scrub import machine_paths, scrubbed_copy

ROOT = Path(__file__).resolve().parents[2]


def run_rounds(sweep: Path, results: Path, rounds: int, under: list[str]) -> None:
    """`under`: a command the sweep runs inside (e.g. salloc), [] for none."""
    results.mkdir(parents=True, exist_ok=True)
    for i in range(rounds):
        for mode in ("warm", "cold") if i % 2 == 0 else ("cold", "warm"):
            out = results / f"{mode}-{i + 1}"
            if (out / "summary.parquet").exists():
                continue
            shutil.rmtree(out, ignore_errors=True)
            argv = [
                *under,
                sys.executable,
                "-m",
                "harness.cli.main",
                "sweep",
                str(sweep),
                "--output",
                str(out),
                "--no-progress",
            ]
            t0 = time.monotonic()
            code = subprocess.run(
                argv + (["--cold"] if mode == "cold" else []), cwd=ROOT, stdout=subprocess.DEVNULL
            ).returncode
            wall = time.monotonic() - t0
            (out / "sweep_wall_s.txt").write_text(f"{wall:.2f}\n")
            print(f"{out.name}: {wall:.1f} s (exit {code})", flush=True)


ONE_CELL = ["run", "--workload", "bert-base-tiny", "--scheme", "ddp", "--workers", "2", "--iters", "1", "--warmup", "0"]
"""The one-iteration command the issue times (its wall, from the shell, includes every import)."""


def time_one_cell(rounds: int, before: Path | None, out: Path) -> pd.DataFrame:
    """The one-iteration `ddlbench run`, `rounds` times each way, alternated: the installed console script
    (warm, the default), the same with --cold, and `before` (another checkout, `python -m harness.cli.main`)."""
    ways = {"warm": ["ddlbench"], "cold": ["ddlbench"]}
    if before is not None:
        ways["before"] = [sys.executable, "-m", "harness.cli.main"]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(rounds):
            for way in list(ways) if i % 2 == 0 else list(reversed(ways)):
                env = {**os.environ, "PYTHONPATH": str(before)} if way == "before" else None
                argv = [*ways[way], *ONE_CELL, "--output", f"{tmp}/{way}-{i}"] + (["--cold"] if way == "cold" else [])
                t0 = time.monotonic()
                code = subprocess.run(
                    argv,
                    cwd=before if way == "before" else ROOT,
                    env=env,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                ).returncode
                rows.append({"way": way, "round": i + 1, "wall_s": round(time.monotonic() - t0, 2), "exit": code})
                print(f"{way} {i + 1}: {rows[-1]['wall_s']} s (exit {code})", flush=True)
    df = pd.DataFrame(rows)
    out.mkdir(parents=True, exist_ok=True)
    df.to_csv(out / "one-cell.csv", index=False)
    print(df.groupby("way")["wall_s"].describe()[["count", "min", "50%", "max"]].to_string())
    return df


def per_run(results: Path) -> pd.DataFrame:
    rows = []
    for d in sorted(p for p in results.iterdir() if (p / "summary.parquet").exists()):
        s = pd.read_parquet(d / "summary.parquet")
        raw = pd.read_parquet(d / "raw.parquet")
        r0 = raw[raw["rank"] == 0].groupby("cell_id")["iter_s"]
        measured = r0.sum()
        warm_iters = pd.Series(
            {c: s.set_index("cell_id").loc[c, "warmup"] if "warmup" in s else 0 for c in measured.index}
        )
        median = r0.median()
        loop = measured + warm_iters * median  # warm-up iterations are not stored: counted at the median
        fixed = s.set_index("cell_id")["wall_s"] - loop
        wall = float((d / "sweep_wall_s.txt").read_text()) if (d / "sweep_wall_s.txt").exists() else float("nan")
        rows.append(
            {
                "run": d.name,
                "mode": d.name.split("-")[0],
                "cells": len(s),
                "ok": int((s["status"] == "ok").sum()),
                "sweep_wall_s": wall,
                "measured_s": measured.sum(),
                "measured_share": measured.sum() / wall,
                "fixed_cost_median_s": fixed.median(),
                "fixed_cost_min_s": fixed.min(),
                "fixed_cost_max_s": fixed.max(),
                "startup_median_s": s["startup_s"].median(),
                "rank_start": ",".join(sorted(set(s["rank_start"].astype(str)))),
            }
        )
    return pd.DataFrame(rows)


def gate(results: Path, report: Path) -> str:
    cold = sorted(str(p) for p in results.glob("cold-*") if (p / "summary.parquet").exists())
    warm = sorted(str(p) for p in results.glob("warm-*") if (p / "summary.parquet").exists())
    base_dir = results / "baselines"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "harness.cli.main",
            "baseline",
            "save",
            "cold",
            *cold,
            "--force",
            "--dir",
            str(base_dir),
        ],
        cwd=ROOT,
        check=True,
        stdout=subprocess.DEVNULL,
    )
    out = subprocess.run(
        [sys.executable, "-m", "harness.cli.main", "compare", "cold", *warm, "--baselines-dir", str(base_dir)],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    text = out.stdout + out.stderr + f"\n(exit status {out.returncode}: 0 = no cell worse)\n"
    (report / "gate.txt").write_text(text)
    return text


def write_report(results: Path, report: Path, title: str) -> None:
    report.mkdir(parents=True, exist_ok=True)
    runs = per_run(results)
    runs.to_csv(report / "runs.csv", index=False)
    for d in results.iterdir():
        if (d / "summary.parquet").exists():
            (report / "runs" / d.name).mkdir(parents=True, exist_ok=True)
            for t in ("summary", "environment"):
                scrubbed_copy(
                    d / f"{t}.parquet", report / "runs" / d.name / f"{t}.parquet", machine_paths(ROOT, RESULTS=results)
                )
    verdict = gate(results, report)
    by_mode = runs.groupby("mode")[
        ["sweep_wall_s", "measured_share", "fixed_cost_median_s", "startup_median_s"]
    ].median()
    load = os.getloadavg()
    text = [
        f"# Warm ranks against cold ones: {title}",
        "",
        "Generated by `python scripts/reports/warm_vs_cold.py run` (rounds alternated; see the script's docstring",
        f"for the definitions). Load average when the report was written: {load[0]:.2f}.",
        "",
        "## Per run",
        "",
        _md(runs.round(3)),
        "",
        "## Median over runs, per mode",
        "",
        _md(by_mode.round(3).reset_index()),
        "",
        "## The gate over rounds (baseline: the cold runs; current: the warm runs)",
        "",
        "```",
        verdict.strip(),
        "```",
        "",
    ]
    (report / "README.md").write_text("\n".join(text))
    print("\n".join(text))


def _md(df: pd.DataFrame) -> str:
    """A Markdown table (pandas' to_markdown needs tabulate, which ddlbench does not depend on)."""
    cols = [str(c) for c in df.columns]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(str(v) for v in row) + " |" for row in df.itertuples(index=False)]
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("what", choices=["run", "table", "one"])
    ap.add_argument("--sweep", type=Path, default=ROOT / "sweeps" / "quick.yaml")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--results", type=Path, default=ROOT / "results" / "warm-vs-cold")
    ap.add_argument("--out", type=Path, default=ROOT / "reports" / "warm-vs-cold")
    ap.add_argument("--under", default="", help='a command to run each sweep inside, e.g. "salloc -N2"')
    ap.add_argument("--before", type=Path, help="with `one`: a checkout of an earlier commit to time beside")
    a = ap.parse_args()
    if a.what == "one":
        time_one_cell(a.rounds, a.before, a.out)
        return 0
    under = shlex.split(a.under)
    if a.what == "run":
        run_rounds(a.sweep, a.results, a.rounds, under)
    sweep = a.sweep.resolve().relative_to(ROOT) if a.sweep.resolve().is_relative_to(ROOT) else a.sweep
    write_report(a.results, a.out, f"`{sweep}` " + (f"under `{a.under}`" if under else "on this box"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
