"""Synthetic runs and histories, for the tests, the screenshot and the scale benchmark (scripts/reports/):
runs shaped like a run directory's tables (so they go through the same rows and fingerprints as real runs),
and, for thousands of cells, whole batches of history rows made from one template.

    runs = series_runs(30, ["resnet50-tiny:ddp"], spread=0.01, steps={"resnet50-tiny:ddp": (20, -0.10)})
    for rows in scaled_batches(template, runs=500, spread=0.02): store.append(rows, "history/")
"""

from __future__ import annotations

import datetime
import hashlib
from pathlib import Path

import numpy as np
import pandas as pd

from harness.core.atomic import write_parquet_atomic
from harness.results.store import RunTables

BATCH = 8
"""Per-worker batch of the synthetic cells."""
START = datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc)


def fake_commit(i: int) -> str:
    """A sha-shaped name for the i-th synthetic commit (in no repository: ordered by time)."""
    return hashlib.sha1(f"commit {i}".encode()).hexdigest()


def run_tables(
    run_id: str,
    cells: dict,
    commit: str = "",
    created: datetime.datetime = START,
    env: dict | None = None,
    workers: int = 2,
) -> RunTables:
    """A run's tables: `cells` maps "workload:scheme" to its slowest rank's per-iteration times (s)."""
    summary, raw = [], []
    for name, times in cells.items():
        workload, scheme = name.split(":")
        cell_id = f"{run_id}.{workload}.{scheme}.w{workers}"
        x = BATCH * workers / np.asarray(times, float)
        summary.append(
            {
                "schema_version": 1,
                "run_id": run_id,
                "cell_id": cell_id,
                "source": "measured",
                "status": "ok",
                "reason": "",
                "workload": workload,
                "sample_unit": "samples",
                "scheme": scheme,
                "backend": "torch",
                "workers": workers,
                "servers": 0,
                "batch_per_worker": BATCH,
                "global_batch": BATCH * workers,
                "seq_len": None,
                "knobs_json": "{}",
                "network": "loopback",
                "host_heap": "kept",
                "throughput_median": float(np.median(x)),
                "throughput_ci95_low": float(x.mean() - 1.96 * x.std(ddof=1) / np.sqrt(x.size)),
                "throughput_ci95_high": float(x.mean() + 1.96 * x.std(ddof=1) / np.sqrt(x.size)),
            }
        )
        raw += [
            {"schema_version": 1, "run_id": run_id, "cell_id": cell_id, "rank": 0, "iteration": i, "iter_s": t}
            for i, t in enumerate(times)
        ]
    environment = pd.DataFrame(
        [
            {
                "schema_version": 1,
                "run_id": run_id,
                "created_utc": created.isoformat(),
                "git_commit": commit,
                "python": "3.11",
                "torch": "2.13.0+cpu",
                "cpu_model": "synthetic cpu",
                "cpu_count": 2,
                "hosts": "ci-runner",
                "device": "cpu",
                "libraries": "",
                **(env or {}),
            }
        ]
    )
    return RunTables(Path(run_id), pd.DataFrame(raw), pd.DataFrame(summary), environment, pd.DataFrame())


def series_runs(
    runs: int,
    cells,
    spread: float = 0.02,
    iters: int = 20,
    steps: dict | None = None,
    seed: int = 0,
    commits=None,
    env: dict | None = None,
    first: int = 0,
    level_s: float = 0.1,
) -> list[RunTables]:
    """`runs` runs of the same cells, one a day: each run's level drawn with `spread` (the run-to-run CV), its
    iterations 1% around it; `steps`: cell -> (run index, relative throughput change) from that run on."""
    rng = np.random.default_rng(seed)
    out = []
    for r in range(first, first + runs):
        cells_r = {}
        for i, name in enumerate(cells):
            at, size = (steps or {}).get(name, (None, 0.0))
            level = level_s * (1 + 0.2 * i) * (1 + spread * rng.standard_normal())
            level /= 1 + (size if at is not None and r >= at else 0.0)
            cells_r[name] = level * (1 + 0.01 * rng.standard_normal(iters))
        commit = commits[r] if commits is not None else fake_commit(r)
        out.append(run_tables(f"run-{r:04d}", cells_r, commit, START + datetime.timedelta(days=r), env))
    return out


def write_run_dir(tables: RunTables, path: str | Path) -> Path:
    """A synthetic run's tables as a run directory (summary, raw and environment Parquet files)."""
    path = Path(path)
    for name in ("summary", "raw", "environment"):
        write_parquet_atomic(getattr(tables, name), path / f"{name}.parquet")
    return path


def scaled_batches(
    template: pd.DataFrame, runs: int, spread: float = 0.02, iters: int = 20, seed: int = 0, name: str = "scale"
):
    """One DataFrame of history rows per run, made from `template` (the rows of one run: each cell once), its
    levels drawn as in series_runs: for scale benchmarks (thousands of cells, hundreds of runs)."""
    rng = np.random.default_rng(seed)
    base = template["throughput_median"].to_numpy(float)
    for r in range(runs):
        med = base * (1 + spread * rng.standard_normal(base.size))
        created = (START + datetime.timedelta(hours=r)).isoformat()
        samples = med[:, None] * (1 + 0.01 * rng.standard_normal((base.size, iters)))
        yield template.assign(
            run_key=f"{name}-{r:05d}@{created}",
            run_id=f"{name}-{r:05d}",
            run_utc=created,
            commit=fake_commit(r),
            commit_depth=-1,
            throughput_median=med,
            throughput_ci95_low=med * 0.99,
            throughput_ci95_high=med * 1.01,
            samples=list(samples),
        )
