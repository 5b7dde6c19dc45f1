"""A commbench run's table on disk (docs/ARCHITECTURE.md, "Tidy tables"): RUN/commbench.parquet, merged
collective by collective, and the run's environment row."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from harness.core.atomic import write_parquet_atomic
from harness.experiment.execute import write_environment
from harness.results.files import read_table


def store_rows(run_dir: Path, df: pd.DataFrame, collective: str, workers: int, device: str) -> None:
    """Merge these rows into RUN/commbench.parquet, replacing the rows of the same collective and worker
    count (a measurement taken again), and write the run's environment row if it has none."""
    target = run_dir / "commbench.parquet"
    if target.exists():
        old = read_table(target, fix="measure again into a new --output")
        old = old[~((old["collective"] == collective) & (old["workers"] == workers))]
        df = pd.concat([old, df], ignore_index=True)
    write_parquet_atomic(df, target)
    if not (run_dir / "environment.parquet").exists():
        write_environment(run_dir, run_dir.name, device)
