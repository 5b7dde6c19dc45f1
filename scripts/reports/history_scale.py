"""The history's scale benchmark (issue 45): `ddlbench history changes` over a synthetic store of 2,000 cells x
500 runs, cold (no cache: every series searched, the null penalty simulated) and incremental (one new run of a
few cells: only their series searched again), each in a fresh process: wall time and peak memory (max RSS).

    python scripts/reports/history_scale.py reports/history/scale            # full size: run on a quiet machine
    python scripts/reports/history_scale.py /tmp/scale --cells 50 --runs 40  # a quick check that it works

Writes OUT/scale.json and OUT/scale.md (the store itself goes to OUT/store, removed afterwards unless --keep).
Goal: under 60 s and under 2 GB (docs/ARCHITECTURE.md, "History").
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from harness.history import store, synthetic  # noqa: E402
from harness.history.rows import run_rows  # noqa: E402

SCHEMES = ("ddp", "bsp-a2a", "wfbp-a2a", "mgwfbp", "bytescheduler-a2a", "bsp-ps", "wfbp-ps", "bytescheduler-ps")


def build(history: Path, cells: int, runs: int) -> float:
    t0 = time.perf_counter()
    names = [f"workload-{i // len(SCHEMES):04d}:{SCHEMES[i % len(SCHEMES)]}" for i in range(cells)]
    template = run_rows(synthetic.run_tables("template", {n: [0.1] * 5 for n in names}))
    for rows in synthetic.scaled_batches(template, runs):
        store.append(rows, history)
    return time.perf_counter() - t0


CHILD = """
import resource, sys, time
t0 = time.perf_counter()
from harness.cli.main import cli
try:
    cli(["history", "changes", "--history", sys.argv[1]], standalone_mode=False)
finally:
    print(f"@@ {time.perf_counter() - t0:.2f} {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}", file=sys.stderr)
"""


def timed_changes(history: Path) -> dict:
    """`ddlbench history changes` in a fresh process: its wall time (imports included) and its own peak RSS."""
    out = subprocess.run([sys.executable, "-c", CHILD, str(history)], cwd=ROOT, capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"history changes failed: {out.stderr[-2000:]}")
    wall, peak_kb = out.stderr.strip().splitlines()[-1].split()[1:]
    return {
        "seconds": round(float(wall), 1),
        "peak_rss_mb": round(int(peak_kb) / 1024),
        "first_line": out.stdout.splitlines()[0] if out.stdout else "",
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--cells", type=int, default=2000)
    ap.add_argument("--runs", type=int, default=500)
    ap.add_argument("--new-cells", type=int, default=20, help="cells with one new run for the incremental search")
    ap.add_argument("--keep", action="store_true", help="keep the synthetic store in OUT/store")
    args = ap.parse_args()
    history = args.out / "store"
    shutil.rmtree(history, ignore_errors=True)
    built_s = build(history, args.cells, args.runs)
    cold = timed_changes(history)
    template = store.read(history, columns=list(store.COLUMNS))[0].drop_duplicates("cell_key").head(args.new_cells)
    store.append(next(synthetic.scaled_batches(template, 1, seed=99, name="new")), history)
    incremental = timed_changes(history)
    result = {
        "cells": args.cells,
        "runs": args.runs,
        "rows": args.cells * args.runs,
        "build_s": round(built_s, 1),
        "store_mb": round(sum(f.stat().st_size for f in store.files(history)) / 2**20, 1),
        "cold": cold,
        "incremental": {**incremental, "new_cells": args.new_cells},
        "goal": "under 60 s and 2 GB",
        "cpus": subprocess.run(["nproc"], capture_output=True, text=True).stdout.strip(),
    }
    if not args.keep:
        shutil.rmtree(history)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "scale.json").write_text(json.dumps(result, indent=1) + "\n")
    md = (
        f"## History scale: {args.cells} cells x {args.runs} runs ({result['rows']} rows, "
        f"{result['store_mb']} MB)\n\n"
        f"| search | wall s | peak RSS MB |\n|---|---:|---:|\n"
        f"| cold (no cache, null penalty simulated) | {cold['seconds']} | {cold['peak_rss_mb']} |\n"
        f"| incremental ({args.new_cells} cells with a new run) | {incremental['seconds']} | "
        f"{incremental['peak_rss_mb']} |\n\nGoal: {result['goal']}; {result['cpus']} CPUs; store built in "
        f"{result['build_s']} s.\n"
    )
    (args.out / "scale.md").write_text(md)
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
