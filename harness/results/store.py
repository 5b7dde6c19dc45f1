"""Run directories on disk: atomic writes, per-cell parts, consolidated tables, resume.

    results/<run-id>/
        raw.parquet summary.parquet environment.parquet [commbench.parquet]   (consolidated)
        cells/<cell-id>/{cell.json, result.json, rank*.log, raw.parquet, summary.parquet}

The per-cell parts are the truth; the consolidated tables are rebuilt from them after every cell, each
written to a temporary file and renamed, so an interrupted sweep loses nothing already measured.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from harness.core.atomic import write_parquet_atomic
from harness.core.errors import UserError
from harness.results.files import RUN_TABLE_FIX, read_table, unwritable
from harness.results.paths import RESULTS_ROOT
from harness.results.summarize import add_scaling
from harness.core.schema import SCHEMA_VERSION

TABLES = ("raw", "summary", "environment", "commbench")
def cell_dir(run_dir: Path, cell_id: str) -> Path:
    return run_dir / "cells" / cell_id


def save_cell(run_dir: Path, cell_id: str, raw: pd.DataFrame | None, summary: dict) -> None:
    d = cell_dir(run_dir, cell_id)
    try:
        if raw is not None and len(raw):
            write_parquet_atomic(raw, d / "raw.parquet")
        write_parquet_atomic(pd.DataFrame([summary]), d / "summary.parquet")  # last: marks the cell done
        consolidate(run_dir)
    except OSError as e:  # e.g. the directory became read-only mid-sweep: earlier cells stay on disk
        raise unwritable(e, f"run directory {run_dir}", f"make it writable, then finish the run with "
                                                       f"--resume --output {run_dir}") from None


_PART_FIX = "remove that cell's directory and resume the run (--resume) to measure the cell again"

INTERRUPTED = "interrupted"
"""Reason prefix of a cell stopped by a signal to the driver: recorded, but run again on --resume."""


def finished_cells(run_dir: Path, include_failed: bool = True) -> set[str]:
    """Cells with a summary part (failed ones too unless include_failed=False); interrupted cells are
    never finished."""
    done = set()
    for part in (run_dir / "cells").glob("*/summary.parquet"):
        row = read_table(part, fix=_PART_FIX)
        if row["reason"].fillna("").astype(str).str.startswith(INTERRUPTED).any():
            continue
        if include_failed or (row["status"] == "ok").all():
            done.add(part.parent.name)
    return done


def consolidate(run_dir: Path) -> None:
    cells = sorted((run_dir / "cells").glob("*/summary.parquet"))
    if cells:
        summary = pd.concat([read_table(p, fix=_PART_FIX) for p in cells], ignore_index=True)
        write_parquet_atomic(add_scaling(summary), run_dir / "summary.parquet")
    raws = sorted((run_dir / "cells").glob("*/raw.parquet"))
    if raws:
        write_parquet_atomic(pd.concat([read_table(p, fix=_PART_FIX) for p in raws], ignore_index=True),
                             run_dir / "raw.parquet")


def rebuild(run_dir: Path) -> None:
    """consolidate, with an unwritable directory as a one-line error."""
    try:
        consolidate(run_dir)
    except OSError as e:
        raise unwritable(e, f"run directory {run_dir}", "make it writable, then run again with --resume") from None


def holds_run(run_dir: Path) -> bool:
    """Does run_dir already hold results (cell parts or tables)?"""
    return (run_dir / "cells").is_dir() or any((run_dir / f"{t}.parquet").exists() for t in TABLES)


def prepare_run(run_dir: Path, resume: bool, overwrite: bool) -> None:
    """Refuse to write over an existing run unless resuming it or overwriting it on purpose; with
    `overwrite`, remove the old run's parts and tables (only those: other files stay). Call it under
    run_lock."""
    if resume and overwrite:
        raise UserError("--resume and --overwrite exclude each other: resume keeps the measured cells, "
                        "overwrite discards them; give one")
    if not holds_run(run_dir) or resume:
        return
    if not overwrite:
        raise UserError(f"{run_dir} already holds a run: add --resume to run only its missing cells, "
                        f"--overwrite to discard it and measure again, or give another --output")
    try:
        if (run_dir / "cells").is_dir():
            shutil.rmtree(run_dir / "cells")
        for t in TABLES:
            (run_dir / f"{t}.parquet").unlink(missing_ok=True)
    except OSError as e:
        raise unwritable(e, f"run directory {run_dir}", "fix its permissions or give another --output") from None


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
    root = results_root or RESULTS_ROOT
    if (root / str(run)).is_dir():
        return root / str(run)
    raise UserError(f"no run at {str(run)!r}: give a run directory or a run id under {root}/ "
                    f"(see `ls {root}`)")


def load_run(run: str | Path) -> RunTables:
    path = resolve_run(run)
    tables = {}
    for name in TABLES:
        f = path / f"{name}.parquet"
        tables[name] = read_table(f, fix=RUN_TABLE_FIX) if f.exists() else pd.DataFrame()
    if tables["summary"].empty and tables["commbench"].empty:
        raise UserError(f"run {path} has no results yet (no summary.parquet): run or resume the sweep first")
    for name, df in tables.items():
        if not df.empty and "schema_version" in df and (df["schema_version"] > SCHEMA_VERSION).any():
            raise UserError(f"{path}/{name}.parquet was written by a newer ddlbench (schema "
                            f"{int(df['schema_version'].max())} > {SCHEMA_VERSION}): upgrade ddlbench")
    for name, needed in (("summary", SUMMARY_NEEDS), ("commbench", COMMBENCH_NEEDS)):
        missing = [c for c in needed if not tables[name].empty and c not in tables[name]]
        if missing:
            raise UserError(f"{path}/{name}.parquet is not a ddlbench {name} table (no {', '.join(missing)} "
                            f"column): give a run directory written by `ddlbench run`/`sweep`/`commbench`")
    return RunTables(path=path, **tables)


SUMMARY_NEEDS = ("cell_id", "status", "workload", "scheme", "workers")
"""Columns every reader of a summary relies on (the full contract: harness.core.schema.SUMMARY_COLUMNS)."""
COMMBENCH_NEEDS = ("collective", "workers", "size_bytes", "time_s", "network")
