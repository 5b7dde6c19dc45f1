"""Run directories on disk: atomic writes, per-cell parts, consolidated tables, resume.

    results/<run-id>/
        raw.parquet summary.parquet environment.parquet [commbench.parquet]   (consolidated)
        cells/<cell-id>/{cell.json, result.json, rank*.log, raw.parquet, summary.parquet}

The per-cell parts are the truth; the consolidated tables are rebuilt from them after every cell, each
written to a temporary file and renamed, so an interrupted sweep loses nothing already measured.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from harness.atomic import write_parquet_atomic
from harness.errors import UserError
from harness.results.summarize import add_scaling
from harness.schema import SCHEMA_VERSION

TABLES = ("raw", "summary", "environment", "commbench")


def new_run_id(name: str = "run") -> str:
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%d-%H%M%S")
    return f"{stamp}-{name}"


def cell_dir(run_dir: Path, cell_id: str) -> Path:
    return run_dir / "cells" / cell_id


def save_cell(run_dir: Path, cell_id: str, raw: pd.DataFrame | None, summary: dict) -> None:
    d = cell_dir(run_dir, cell_id)
    if raw is not None and len(raw):
        write_parquet_atomic(raw, d / "raw.parquet")
    write_parquet_atomic(pd.DataFrame([summary]), d / "summary.parquet")  # last: marks the cell done
    consolidate(run_dir)


def finished_cells(run_dir: Path, include_failed: bool = True) -> set[str]:
    done = set()
    for part in (run_dir / "cells").glob("*/summary.parquet"):
        row = pd.read_parquet(part)
        if include_failed or (row["status"] == "ok").all():
            done.add(part.parent.name)
    return done


def consolidate(run_dir: Path) -> None:
    cells = sorted((run_dir / "cells").glob("*/summary.parquet"))
    if cells:
        summary = pd.concat([pd.read_parquet(p) for p in cells], ignore_index=True)
        write_parquet_atomic(add_scaling(summary), run_dir / "summary.parquet")
    raws = sorted((run_dir / "cells").glob("*/raw.parquet"))
    if raws:
        write_parquet_atomic(pd.concat([pd.read_parquet(p) for p in raws], ignore_index=True),
                             run_dir / "raw.parquet")


@dataclass
class RunTables:
    path: Path
    raw: pd.DataFrame
    summary: pd.DataFrame
    environment: pd.DataFrame
    commbench: pd.DataFrame


def resolve_run(run: str | Path, results_root: Path | None = None) -> Path:
    """A run given as a path, or as a run id under results/."""
    p = Path(run)
    if p.is_dir():
        return p
    root = results_root or Path("results")
    if (root / str(run)).is_dir():
        return root / str(run)
    raise UserError(f"no run at {str(run)!r}: give a run directory or a run id under {root}/ "
                    f"(see `ls {root}`)")


def load_run(run: str | Path) -> RunTables:
    path = resolve_run(run)
    tables = {}
    for name in TABLES:
        f = path / f"{name}.parquet"
        tables[name] = pd.read_parquet(f) if f.exists() else pd.DataFrame()
    if tables["summary"].empty and tables["commbench"].empty:
        raise UserError(f"run {path} has no results yet (no summary.parquet): run or resume the sweep first")
    for name, df in tables.items():
        if not df.empty and "schema_version" in df and (df["schema_version"] > SCHEMA_VERSION).any():
            raise UserError(f"{path}/{name}.parquet was written by a newer ddlbench (schema "
                            f"{int(df['schema_version'].max())} > {SCHEMA_VERSION}): upgrade ddlbench")
    return RunTables(path=path, **tables)
