"""The harness's share of a 2-worker CPU cell's run-to-run spread (issue 53): `ddlbench sweep` runs alternated with
a bare gloo loop doing the same work (experiments/spread/spread.py), on a quiet machine (check `uptime` first),
from the repository's root:

    python -m experiments.spread.run --out reports/spread/six-rounds --rounds 6
    python -m experiments.spread.run --out /tmp/spread --rounds 6 --variants as-is,cold,warmup-10

Writes OUT/runs.csv (one row per run and scheme) and OUT/README.md (the summary table, with the load before
and after).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import time
from pathlib import Path

from experiments.spread.spread import VARIANTS, alternate, markdown, summarise


def _commit() -> str:
    r = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return r.stdout.strip() or "unknown"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--workload", default="resnet50-tiny")
    ap.add_argument("--schemes", default="bsp-a2a,ddp")
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--iters", type=int, default=12)
    ap.add_argument("--variants", default="as-is", help=f"harness variants, comma-separated: {', '.join(VARIANTS)}")
    a = ap.parse_args()
    variants = tuple(v for v in a.variants.split(",") if v)
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        raise SystemExit(f"unknown variant(s) {', '.join(unknown)}: choose from {', '.join(VARIANTS)}")
    load0, t0 = os.getloadavg()[0], time.time()
    runs = alternate(
        a.out,
        a.workload,
        tuple(a.schemes.split(",")),
        a.rounds,
        a.warmup,
        a.iters,
        variants,
        progress=lambda s: print(s, flush=True),
    )
    load1 = os.getloadavg()[0]
    summary = summarise(runs)
    summary.to_csv(a.out / "summary.csv", index=False)
    text = markdown(summary, f"{a.workload}, 2 workers over gloo, warm-up {a.warmup}, {a.iters} iterations")
    text += (
        f"\nCommit {_commit()}; {a.rounds} alternated rounds in {time.time() - t0:.0f} s; 1-minute load "
        f"{load0:.2f} before, {load1:.2f} after.\n"
    )
    (a.out / "README.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
