"""What the stop rule saves, and how honest its stop is (issue 63; README, "Measuring"): one sweep file measured
three ways in a row, on a quiet machine (check `uptime` first), from the repository's root:

    python -m experiments.stop_rule.run --sweep sweeps/quick.yaml --precision 5% --out reports/stop-rule

- fixed: the sweep as written (its `warmup` + `iters`);
- precise: the same with `--precision P` (the rule's default bounds: min-iters = iters, max-iters = 10 x that);
- audited: the same again with DDLBENCH_STOP_AUDIT=1: every cell runs on past the block where its rule stops to
  max-iters, and records that block (`audit_stopped_at` in its result): the median of the slowest rank's iterations
  up to the stop, held against the median over every iteration of the same ranks.

Writes OUT/cells.csv (one row per cell and variant), OUT/audit.csv and OUT/README.md (iterations and wall time per
variant; how often the stop's median lay within +-P of the long reference), with the load before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

from harness.contracts.cell import parse_precision
from harness.measure.stoprule import AUDIT_VAR
from harness.results.machine_load import loadavg

VARIANTS = ("fixed", "precise", "audited")


def sweep(sweep_file: Path, out: Path, precision: str | None, audit: bool) -> float:
    """One `ddlbench sweep` into `out`; its wall time, s."""
    cmd = [sys.executable, "-m", "harness.cli.main", "sweep", str(sweep_file), "--output", str(out)]
    cmd += ["--precision", precision] if precision else []
    env = {**os.environ, AUDIT_VAR: "1" if audit else "0"}
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t0


def cells(run: Path, variant: str) -> pd.DataFrame:
    s = pd.read_parquet(run / "summary.parquet")
    keep = ["cell_id", "workload", "scheme", "workers", "samples", "iter_s_median", "stop_reason"]
    keep += [c for c in ("precision_target", "precision_reached") if c in s]
    return s[[c for c in keep if c in s]].assign(variant=variant)


def audit(run: Path, precision: float) -> pd.DataFrame:
    """Per multi-worker cell of the audited run: the median of the slowest rank's iterations up to where the rule
    stopped, against the median over all of them."""
    raw = pd.read_parquet(run / "raw.parquet")
    rows = []
    for result in sorted((run / "cells").glob("*/result.json")):
        r = json.loads(result.read_text())
        stop = (r.get("effective") or {}).get("audit_stopped_at")
        cell = (r.get("cell") or {}).get("cell_id") or result.parent.name
        it = raw[raw["cell_id"] == cell].pivot_table(index="iteration", columns="rank", values="iter_s")
        slowest = it.max(axis=1).to_numpy()
        if stop is None or not len(slowest):
            rows.append({"cell_id": cell, "stopped_at": stop, "iterations": len(slowest)})
            continue
        at_stop, at_end = float(np.median(slowest[:stop])), float(np.median(slowest))
        rows.append(
            {
                "cell_id": cell,
                "stopped_at": int(stop),
                "iterations": len(slowest),
                "median_at_stop_s": at_stop,
                "median_at_end_s": at_end,
                "difference": at_stop / at_end - 1,
                "within": abs(at_stop / at_end - 1) <= precision,
            }
        )
    return pd.DataFrame(rows)


def _commit() -> str:
    r = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return r.stdout.strip() or "unknown"


def readme(t: pd.DataFrame, a: pd.DataFrame, wall: dict, p: str, sweep_file: Path, load: tuple) -> str:
    per = t.groupby("variant").agg(cells=("cell_id", "size"), iterations=("samples", "sum"))
    lines = [
        "# The stop rule: what it saves and how honest its stop is",
        "",
        f"`python -m experiments.stop_rule.run --sweep {sweep_file} --precision {p}"
        f"{'' if tuple(wall) == VARIANTS else ' --variants ' + ','.join(wall)}` at commit {_commit()}, "
        f"load average {load[0][0]:.2f} before and {load[1][0]:.2f} after (1 min).",
        "",
        "| variant | cells | iterations measured | sweep wall time |",
        "|---|---:|---:|---:|",
    ]
    for v in VARIANTS:
        if v in per.index:
            lines.append(f"| {v} | {per.loc[v, 'cells']} | {per.loc[v, 'iterations']} | {wall[v]:.0f} s |")
    precise = t[t["variant"] == "precise"]
    if "stop_reason" in precise:
        counts = precise["stop_reason"].value_counts().to_dict()
        lines += ["", "How the precise run's cells stopped: " + ", ".join(f"{k} {n}" for k, n in counts.items()) + "."]
    done = a.dropna(subset=["difference"]) if "difference" in a else a.iloc[0:0]
    if len(done):
        typical, largest = done["difference"].abs().median(), done["difference"].abs().max()
        lines += [
            "",
            f"Audited: {int(done['within'].sum())} of {len(done)} cells' medians at their stop lay within +-{p} of "
            f"the median over every iteration to max-iters (median |difference| {typical:.1%}, largest {largest:.1%}). "
            "Run-to-run drift between separate runs is another "
            "thing: the history measures it.",
        ]
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sweep", type=Path, default=Path("sweeps/quick.yaml"))
    ap.add_argument("--precision", default="5%")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument(
        "--variants",
        default=",".join(VARIANTS),
        help="which of fixed,precise,audited to run (a study-sized sweep audited to max-iters takes hours)",
    )
    a = ap.parse_args()
    p = parse_precision(a.precision)
    chosen = [v for v in VARIANTS if v in a.variants.split(",")]
    a.out.mkdir(parents=True, exist_ok=True)
    before = loadavg()
    how = {"fixed": (None, False), "precise": (a.precision, False), "audited": (a.precision, True)}
    wall = {v: sweep(a.sweep, a.out / v, *how[v]) for v in chosen}
    after = loadavg()
    (a.out / "wall.json").write_text(json.dumps({"wall_s": wall, "load_before": before, "load_after": after}))
    t = pd.concat([cells(a.out / v, v) for v in chosen], ignore_index=True)
    aud = audit(a.out / "audited", p) if "audited" in chosen else pd.DataFrame()
    t.to_csv(a.out / "cells.csv", index=False)
    aud.to_csv(a.out / "audit.csv", index=False)
    (a.out / "README.md").write_text(readme(t, aud, wall, a.precision, a.sweep, (before, after)))
    print((a.out / "README.md").read_text())


if __name__ == "__main__":
    main()
