"""A slowdown injected into one scheme of a 2-worker CPU sweep, recorded run after run in a history (issue 53):
is it confirmed within a few runs, with no change on the other cells, and where it is not, does the history say
which step it is blind below? Run on a quiet machine (check `uptime` first).

    python scripts/reports/history_injected.py --out reports/history-injected --clean 6 --slowed 4 --share 0.25

Each run is a fresh `ddlbench sweep` (resnet50-tiny, bsp-a2a, wfbp-a2a and ddp at 2 workers) added with
`ddlbench history add`; the last `--slowed` runs sleep in every iteration of rank 1 of `--scheme`'s cells
(DDLBENCH_FAULT=slow:1:SECONDS:SCHEME, harness/rank/worker.py), SECONDS = `--share` of that cell's median
iteration in the clean runs. Writes OUT/README.md (what `history changes` printed, with the injected step and
the load), OUT/changes.md and OUT/history.html (the page).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from harness.gate.compare import iteration_throughputs
from harness.results.store import load_run

SWEEP = "name: injected\nworkloads: [{w}]\nschemes: [{s}]\nworkers: [2]\nwarmup: {wu}\niters: {it}\ndevice: cpu\n"


def _cli(*args: str, env: dict | None = None) -> str:
    r = subprocess.run(
        [sys.executable, "-m", "harness.cli.main", *args],
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
    )
    if r.returncode not in (0, 1):
        raise SystemExit(f"ddlbench {' '.join(args)} failed ({r.returncode}): {r.stderr.strip()[-400:]}")
    return r.stdout


def _iter_s(run: Path, scheme: str) -> float:
    t = load_run(run)
    x = iteration_throughputs(t.summary, t.raw)
    row = t.summary[(t.summary["scheme"] == scheme) & (t.summary["workers"] == 2)].iloc[0]
    return float(row["global_batch"]) / float(np.median(x[row["cell_id"]]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--workload", default="resnet50-tiny")
    ap.add_argument("--schemes", default="bsp-a2a,wfbp-a2a,ddp")
    ap.add_argument("--scheme", default="bsp-a2a", help="the scheme slowed")
    ap.add_argument("--clean", type=int, default=6)
    ap.add_argument("--slowed", type=int, default=4)
    ap.add_argument("--share", type=float, default=0.25, help="the sleep, as a share of the clean iteration")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--iters", type=int, default=12)
    a = ap.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    load0, t0 = os.getloadavg()[0], time.time()
    with tempfile.TemporaryDirectory(prefix="ddlbench-injected-") as tmp:
        tmp = Path(tmp)
        sweep = tmp / "sweep.yaml"
        schemes = ", ".join(a.schemes.split(","))
        sweep.write_text(SWEEP.format(w=a.workload, s=schemes, wu=a.warmup, it=a.iters))
        history, clean_iter, sleep_s = tmp / "history", [], 0.0
        for i in range(a.clean + a.slowed):
            env = {}
            if i >= a.clean:
                sleep_s = sleep_s or a.share * float(np.median(clean_iter))
                env = {"DDLBENCH_FAULT": f"slow:1:{sleep_s:.4f}:{a.scheme}"}
            run = tmp / f"run-{i:02d}"
            print(f"run {i + 1}/{a.clean + a.slowed}{' (slowed)' if env else ''}", flush=True)
            _cli("sweep", str(sweep), "--output", str(run), "--no-progress", env=env)
            if i < a.clean:
                clean_iter.append(_iter_s(run, a.scheme))
            _cli("history", "add", str(run), "--history", str(history))
        changes = _cli("history", "changes", "--history", str(history), "--all")
        _cli("history", "report", "--history", str(history), "-o", str(a.out / "history.html"))
    load1 = os.getloadavg()[0]
    (a.out / "changes.md").write_text(changes)
    (a.out / "README.md").write_text(
        f"# A slowdown injected into {a.scheme}, recorded in a history\n\n"
        f"{a.workload}, schemes {schemes} at 2 workers (warm-up {a.warmup}, {a.iters} iterations), one fresh "
        f"`ddlbench sweep` per run, {a.clean} clean runs then {a.slowed} with rank 1 of {a.scheme} sleeping "
        f"{sleep_s * 1000:.1f} ms per iteration ({a.share:.0%} of its clean median iteration, "
        f"{np.median(clean_iter) * 1000:.1f} ms). {time.time() - t0:.0f} s in all; 1-minute load {load0:.2f} "
        f"before, {load1:.2f} after.\n\n`ddlbench history changes --all`:\n\n{changes}\n"
    )
    print(changes)


if __name__ == "__main__":
    main()
