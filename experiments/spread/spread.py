"""Where a 2-worker CPU cell's run-to-run spread comes from: the harness against a bare loop, alternated.

A history can see a regression only as far as its series' spread allows (harness/history/blind.py). This
measures how much of that spread is the harness's own: runs of a small sweep exactly as a user records them
(`ddlbench sweep` in a fresh process, one run after another) alternated with runs of the bare loop doing the same
work (experiments/spread/bare_dist.py: same model, batch, world size, gloo and thread count, started by
torch.distributed.run), harness-bare then bare-harness, so that a drift of the machine lands on both sides.

    rows, summary = alternate(out, "resnet50-tiny", ("bsp-a2a", "ddp"), rounds=6)

Per run, each side's number is the median of its per-iteration throughputs (the slowest rank's); per side and
method: the run-to-run spread (the SD of the log run medians, and the robust sigma the history's detector uses:
harness/history/null.py), and the within-run spread (the median over runs of the iterations' coefficient of
variation). `variants` names harness settings that remove one thing at a time (`--cold` ranks, a longer warm-up)
so that what the harness adds is found by taking it away.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd

from harness.gate.compare import iteration_throughputs
from harness.history.null import robust_sigma
from harness.results.store import load_run

BARE_METHOD = {"bsp-a2a": "bsp", "ddp": "ddp"}
"""The harness's schemes a bare loop does the same work as (bare_dist.METHODS)."""

VARIANTS = {
    "as-is": {},
    "cold": {"cold": True},
    "warmup-10": {"warmup": 10},
    "pin": {"env": {"DDLBENCH_PIN_RANKS": "1"}},
}
"""Harness settings to change one thing at a time: the warm zygote (`cold`), a short warm-up (`warmup-10`), ranks
free to move between cores (`pin`: each CPU worker on a core of its own, harness/rank/worker.py pin_cores)."""

ROOT = Path(__file__).resolve().parents[2]
"""The repository's root, put first on the bare loop's PYTHONPATH (it runs as `-m experiments.spread.bare_dist`)."""


def _env(extra: dict | None = None) -> dict:
    return {
        **os.environ,
        **(extra or {}),
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    }


def harness_run(
    workload: str, schemes, warmup: int, iters: int, work: Path, cold: bool = False, env: dict | None = None
) -> dict:
    """One `ddlbench sweep` of (workload x schemes) at 2 workers in a fresh process: scheme -> per-iteration
    throughputs (the slowest rank's)."""
    work.mkdir(parents=True, exist_ok=True)
    sweep = work / "sweep.yaml"
    sweep.write_text(
        f"name: spread\nworkloads: [{workload}]\nschemes: [{', '.join(schemes)}]\nworkers: [2]\n"
        f"warmup: {warmup}\niters: {iters}\ndevice: cpu\ntimeout_s: 300\ncold: {str(cold).lower()}\n"
    )
    out = work / "run"
    subprocess.run(
        [sys.executable, "-m", "harness.cli.main", "sweep", str(sweep), "--output", str(out), "--no-progress"],
        check=True,
        env=_env(env),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    tables = load_run(out)
    x = iteration_throughputs(tables.summary, tables.raw)
    s = tables.summary
    return {
        r["scheme"]: x[r["cell_id"]]
        for _, r in s[(s["workers"] == 2) & (s["status"] == "ok")].iterrows()
        if r["cell_id"] in x
    }


def bare_run(workload: str, schemes, warmup: int, iters: int, work: Path) -> dict:
    """The bare loop of each scheme's work, each in a fresh torch.distributed.run: scheme -> throughputs."""
    work.mkdir(parents=True, exist_ok=True)
    got = {}
    for scheme in schemes:
        out = work / f"{scheme}.json"
        for _ in range(3):  # a start that aborted (seen: SIGABRT in both ranks) runs again; its file decides
            done = subprocess.run(
                [
                    *(sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"),
                    *("-m", "experiments.spread.bare_dist", "--workload", workload, "--method", BARE_METHOD[scheme]),
                    *("--warmup", str(warmup), "--iters", str(iters), "--threads", "1", "--out", str(out)),
                ],
                env=_env(),
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
            )
            if out.exists():
                break
        else:
            raise RuntimeError(f"the bare loop of {scheme} failed 3 times: {done.stderr.strip()[-600:]}")
        r = json.loads(out.read_text())
        got[scheme] = r["global_batch"] / np.asarray(r["iter_s"], dtype=float)
    return got


def alternate(
    out: Path,
    workload: str,
    schemes=("bsp-a2a", "ddp"),
    rounds: int = 6,
    warmup: int = 3,
    iters: int = 12,
    variants=("as-is",),
    progress: Callable[[str], None] = lambda s: None,
) -> pd.DataFrame:
    """Rounds of (each harness variant, the bare loop), the order reversed every other round; one row per run
    and scheme: side (`bare` or `harness:<variant>`), round, run median and within-run CV."""
    rows = []
    sides = [f"harness:{v}" for v in variants] + ["bare"]
    with tempfile.TemporaryDirectory(prefix="ddlbench-spread-") as tmp:
        for k in range(rounds):
            for side in sides if k % 2 == 0 else sides[::-1]:
                work = Path(tmp) / f"{k}-{side.replace(':', '-')}"
                progress(f"round {k + 1}/{rounds}: {side}")
                if side == "bare":
                    got = bare_run(workload, schemes, warmup, iters, work)
                else:
                    v = VARIANTS[side.split(":", 1)[1]]
                    got = harness_run(
                        workload, schemes, v.get("warmup", warmup), iters, work, v.get("cold", False), v.get("env")
                    )
                for scheme, x in got.items():
                    rows.append(
                        {
                            "side": side,
                            "round": k,
                            "workload": workload,
                            "scheme": scheme,
                            "iters": int(x.size),
                            "run_median": float(np.median(x)),
                            "within_cv": float(np.std(x, ddof=1) / np.mean(x)) if x.size > 1 else math.nan,
                        }
                    )
    table = pd.DataFrame(rows)
    out.mkdir(parents=True, exist_ok=True)
    table.to_csv(out / "runs.csv", index=False)
    return table


def summarise(runs: pd.DataFrame) -> pd.DataFrame:
    """Per side and scheme: runs, the median of run medians, the run-to-run spread (SD of log run medians and
    the detector's robust sigma), the within-run CV, and the harness's run-to-run SD over the bare loop's."""
    rows = []
    for (side, scheme), g in runs.groupby(["side", "scheme"], sort=True):
        m = g.sort_values("round")["run_median"].to_numpy(float)
        rows.append(
            {
                "side": side,
                "scheme": scheme,
                "runs": int(m.size),
                "median": float(np.median(m)),
                "min": float(m.min()),
                "max": float(m.max()),
                "run_sd_log": float(np.std(np.log(m), ddof=1)) if m.size > 1 else math.nan,
                "run_robust_sigma": robust_sigma(m / np.median(m)),
                "within_cv": float(g["within_cv"].median()),
            }
        )
    s = pd.DataFrame(rows)
    bare = s[s["side"] == "bare"].set_index("scheme")["run_sd_log"]
    s["sd_over_bare"] = [
        r.run_sd_log / bare[r.scheme] if r.scheme in bare.index and bare[r.scheme] > 0 else math.nan
        for r in s.itertuples()
    ]
    return s


def markdown(summary: pd.DataFrame, title: str) -> str:
    lines = [
        f"## {title}",
        "",
        "| side | scheme | runs | median samples/s | min - max | run-to-run SD (log) | robust sigma | "
        "within-run CV | SD / bare |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in summary.itertuples():
        lines.append(
            f"| {r.side} | {r.scheme} | {r.runs} | {r.median:.1f} | {r.min:.1f} - {r.max:.1f} | {r.run_sd_log:.1%} | "
            f"{r.run_robust_sigma:.1%} | {r.within_cv:.1%} | {r.sd_over_bare:.2f} |"
        )
    return "\n".join(lines) + "\n"
