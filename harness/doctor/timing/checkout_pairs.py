"""The same cell from two checkouts, alternated in pairs: a regression of the harness's own loop.

The same cell from two checkouts, alternated in pairs (issue 39: the CPU loop 5% slower since 6791659): a
regression of the harness's own loop or ranks shows as the second checkout's median iteration against the
first's, with the machine's drift cancelled pair by pair (A-B, then B-A, ...; harness/doctor/timing/paired.py).

    git -C /path/to/ddlbench worktree add --detach /tmp/ddlbench-old 6791659
    python -m harness.doctor.timing.checkout_pairs OUT --old /tmp/ddlbench-old --new . --pairs 6
    python -m harness.doctor.timing.checkout_pairs OUT --old /tmp/ddlbench-old --new . --scheme ddp --workers 2 \\
        --pairs 4
    python -m harness.doctor.timing.checkout_pairs OUT --old /tmp/ddlbench-old --new . --cold --pairs 6   # cold ranks

Each run is `ddlbench run --workload W --scheme S --workers N --warmup 3 --iters 10 --device cpu` from that
checkout (its own CLI entry point, PYTHONPATH = the checkout), its number the summary's `iter_s_median`. Writes
OUT/pairs.csv (one row per pair: both medians, new/old) and prints the median ratio. Measure on a quiet machine
(docs/ARCHITECTURE.md, "Measurement hygiene"): anything else running is in the numbers.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path

import pandas as pd

from harness.core.errors import UserError

ENTRIES = ("harness/cli/entry.py", "harness/entry.py")
"""Where a checkout keeps the `ddlbench` entry point (since issue 33, and before it)."""


def entry_module(checkout: Path) -> str:
    for rel in ENTRIES:
        if (checkout / rel).exists():
            return rel[:-3].replace("/", ".")
    raise UserError(
        f"{checkout} is not a ddlbench checkout (none of {', '.join(ENTRIES)} in it); pass the folder "
        f"a `git worktree add` or `git clone` made"
    )


def run_once(checkout: Path, out: Path, a: argparse.Namespace) -> float:
    """The cell from `checkout` into `out`; its median iteration (seconds)."""
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    argv = [
        sys.executable,
        "-m",
        entry_module(checkout),
        "run",
        "--workload",
        a.workload,
        "--scheme",
        a.scheme,
        "--workers",
        str(a.workers),
        "--warmup",
        str(a.warmup),
        "--iters",
        str(a.iters),
        "--device",
        "cpu",
        "--output",
        str(out),
        *(["--cold"] if a.cold else []),
    ]
    subprocess.run(argv, check=True, cwd=checkout, env=env, stdout=subprocess.DEVNULL, timeout=1800)
    summary = pd.read_parquet(out / "summary.parquet")
    return float(summary[summary["scheme"] == a.scheme]["iter_s_median"].iloc[0])


def pairs(a: argparse.Namespace) -> pd.DataFrame:
    rows = []
    for i in range(a.pairs):
        order = ("old", "new") if i % 2 == 0 else ("new", "old")
        t = {side: run_once(getattr(a, side), a.out / f"{i}-{side}", a) for side in order}
        rows.append(
            {
                "pair": i,
                "first": order[0],
                "old_iter_s": t["old"],
                "new_iter_s": t["new"],
                "new_over_old": t["new"] / t["old"],
            }
        )
        print(f"[checkout_pairs] pair {i} ({order[0]} first): new/old {t['new'] / t['old']:.3f}", flush=True)
    return pd.DataFrame(rows)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--old", type=Path, required=True, help="the checkout to compare against (e.g. at 6791659)")
    ap.add_argument("--new", type=Path, required=True, help="the checkout under test")
    ap.add_argument("--workload", default="bert-base-tiny")
    ap.add_argument("--scheme", default="local")
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--pairs", type=int, default=6)
    ap.add_argument(
        "--cold",
        action="store_true",
        help="ranks as fresh interpreters, not forked from the "
        "pre-imported zygote (their page faults per iteration did not differ between 6791659 and "
        "issue 39's tree, a warm rank's did)",
    )
    a = ap.parse_args(argv)
    try:
        a.old, a.new = a.old.resolve(), a.new.resolve()
        for c in (a.old, a.new):
            entry_module(c)
        if a.out.exists() and any(a.out.iterdir()):
            raise UserError(f"{a.out} is not empty: name a new folder for the runs")
    except UserError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    a.out.mkdir(parents=True, exist_ok=True)
    df = pairs(a)
    df.to_csv(a.out / "pairs.csv", index=False)
    med = statistics.median(df["new_over_old"])
    slower = int((df["new_over_old"] > 1).sum())
    cold = " cold" if a.cold else ""
    print(
        f"[checkout_pairs] {a.workload} {a.scheme} x{a.workers}{cold}: new/old median {med:.3f} over {len(df)} pairs "
        f"({slower} of {len(df)} slower); within 1%: {'yes' if abs(med - 1) <= 0.01 else 'no'}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
