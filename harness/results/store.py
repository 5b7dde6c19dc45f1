"""Run directories on disk: atomic writes, per-cell parts, consolidated tables, resume.

    results/<run-id>/
        raw.parquet summary.parquet environment.parquet [commbench.parquet]   (consolidated)
        cells/<cell-id>/{cell.json, result.json, rank*.log, raw.parquet, summary.parquet}

The per-cell parts are the truth; the consolidated tables are rebuilt from them after every cell, each
written to a temporary file and renamed, so an interrupted sweep loses nothing already measured. Both sides hold
the same rows, so on resume either restores the other (harness/results/repair.py). A folder under cells/ that is
no cell of the run (`cell_parts`) is skipped.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from harness.core.atomic import write_parquet_atomic
from harness.core.errors import UserError
from harness.core.schema import SCHEMA_VERSION
from harness.procs.argv import CELL_FILE
from harness.results.files import read_table, unwritable
from harness.results.paths import RESULTS_ROOT
from harness.results.summarize import add_scaling

TABLES = ("raw", "summary", "environment", "commbench")
REBUILT = ("summary", "raw")
"""The run's tables made from its cells' parts (consolidate); the others are written once, by the run."""


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
        raise unwritable(
            e, f"run directory {run_dir}", f"make it writable, then finish the run with --resume --output {run_dir}"
        ) from None


def part_fix(run_dir: Path) -> str:
    """How to fix a torn or foreign part of a cell of `run_dir`."""
    return (
        f"resume the run ({_resume(run_dir)}): it restores the part from the run's tables, or measures the "
        f"cell again when they do not hold it"
    )


def table_fix(run_dir: Path, table: str) -> str:
    """How to fix the run's torn or foreign table `table` (one of TABLES), by what can make it again."""
    if table == "commbench":  # measured by `ddlbench commbench`, never by a cell
        return f"measure it again: `ddlbench commbench ... --output {run_dir}` with the sizes it had"
    if not (run_dir / "cells").is_dir():
        return "it has no cells/ to rebuild it from: make it again with the command that wrote it"
    if table in REBUILT:
        return f"resume the run ({_resume(run_dir)}): it rebuilds the table from the run's cells/"
    return f"resume the run ({_resume(run_dir)}): no cell holds it, the resume records it again"


def _resume(run_dir: Path) -> str:
    if (run_dir / "sweep.yaml").exists():  # every run of the one sweep path keeps it (experiment/dispatch.py)
        return f"`ddlbench sweep {run_dir / 'sweep.yaml'} --resume --output {run_dir}`"
    return f"its command with `--resume --output {run_dir}`"


INTERRUPTED = "interrupted"
"""Reason prefix of a cell stopped by a signal to the driver: recorded, but run again on --resume."""


def cell_parts(run_dir: Path, known=()) -> tuple[dict[Path, pd.DataFrame | None], list[Path]]:
    """The run's cell folders, each with its summary part (None: none yet, or one that cannot be read), and the
    folders under cells/ that are no cell of the run (foreign: a copy, a backup, notes), which every reader
    skips. A folder is a cell when its summary part names it, when it holds what a cell's ranks read or wrote
    (cell.json, result.json), or when `known` (the cells a resume runs) or the run's summary table names it."""
    parts: dict[Path, pd.DataFrame | None] = {}
    foreign, named = [], None
    for d in sorted(p for p in (run_dir / "cells").glob("*") if p.is_dir()):
        part = readable(d / "summary.parquet")
        if part is not None and not _names(part, d.name):
            part = None  # a table, but not this cell's summary
        if part is None and d.name not in known and not any((d / f).exists() for f in (CELL_FILE, "result.json")):
            named = _summary_ids(run_dir) if named is None else named
            if d.name not in named:
                foreign.append(d)
                continue
        parts[d] = part
    return parts, foreign


def readable(path: Path) -> pd.DataFrame | None:
    """The table at `path`, or None when there is none or it is torn or no Parquet table."""
    if not path.exists():
        return None
    try:
        return read_table(path)
    except UserError:
        return None


def _names(part: pd.DataFrame, cell_id: str) -> bool:
    return len(part) > 0 and {"cell_id", "status"} <= set(part.columns) and (part["cell_id"] == cell_id).all()


def _summary_ids(run_dir: Path) -> set[str]:
    summary = readable(run_dir / "summary.parquet")
    return set(summary["cell_id"].astype(str)) if summary is not None and "cell_id" in summary else set()


def _part(run_dir: Path, d: Path, part: pd.DataFrame | None) -> pd.DataFrame | None:
    """A cell's summary part as cell_parts read it; one that is there but could not be read is an error saying
    how to fix it (a resume repairs parts first: harness/results/repair.py)."""
    if part is None and (d / "summary.parquet").exists():
        again = read_table(d / "summary.parquet", fix=part_fix(run_dir))  # raises, naming pyarrow's why
        if _names(again, d.name):  # written between the two reads: a cell of a live run finishing just now
            return again
        raise UserError(f"{d / 'summary.parquet'} is not the summary of cell {d.name}; {part_fix(run_dir)}")
    return part


def recorded_cells(run_dir: Path) -> dict[Path, pd.DataFrame]:
    """Each cell folder of the run with a summary part, and that part; a part that is there but cannot be read
    is an error saying how to fix it (a resume repairs the parts first: harness/results/repair.py)."""
    out = {}
    for d, part in cell_parts(run_dir)[0].items():
        got = _part(run_dir, d, part)  # the part as read again where the first read found none
        if got is not None:
            out[d] = got
    return out


def finished_cells(run_dir: Path, include_failed: bool = True) -> set[str]:
    """Cells with a summary part (failed ones too unless include_failed=False); interrupted cells are
    never finished."""
    done = set()
    for d, row in recorded_cells(run_dir).items():
        if row["reason"].fillna("").astype(str).str.startswith(INTERRUPTED).any():
            continue
        if include_failed or (row["status"] == "ok").all():
            done.add(d.name)
    return done


def consolidate(run_dir: Path) -> None:
    parts = cell_parts(run_dir)[0]
    summaries = [row for d, part in parts.items() if (row := _part(run_dir, d, part)) is not None]
    if summaries:
        write_parquet_atomic(add_scaling(pd.concat(summaries, ignore_index=True)), run_dir / "summary.parquet")
    raws = [read_table(d / "raw.parquet", fix=part_fix(run_dir)) for d in parts if (d / "raw.parquet").exists()]
    if raws:
        write_parquet_atomic(pd.concat(raws, ignore_index=True), run_dir / "raw.parquet")


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
        raise UserError(
            "--resume and --overwrite exclude each other: resume keeps the measured cells, "
            "overwrite discards them; give one"
        )
    if not holds_run(run_dir) or resume:
        return
    if not overwrite:
        raise UserError(
            f"{run_dir} already holds a run: add --resume to run only its missing cells, "
            f"--overwrite to discard it and measure again, or give another --output"
        )
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
    raise UserError(f"no run at {str(run)!r}: give a run directory or a run id under {root}/ (see `ls {root}`)")


def load_run(run: str | Path, fix: str = "") -> RunTables:
    """The run's tables (a run directory, or a run id under results/); a torn one is a UserError saying how
    to fix it: `fix`, else what can make it again there (`table_fix`)."""
    path = resolve_run(run)
    tables = {}
    for name in TABLES:
        f = path / f"{name}.parquet"
        tables[name] = read_table(f, fix=fix or table_fix(path, name)) if f.exists() else pd.DataFrame()
    if tables["summary"].empty and tables["commbench"].empty:
        raise UserError(f"run {path} has no results yet (no summary.parquet): run or resume the sweep first")
    for name, df in tables.items():
        if not df.empty and "schema_version" in df and (df["schema_version"] > SCHEMA_VERSION).any():
            raise UserError(
                f"{path}/{name}.parquet was written by a newer ddlbench (schema "
                f"{int(df['schema_version'].max())} > {SCHEMA_VERSION}): upgrade ddlbench"
            )
    for name, needed in (("summary", SUMMARY_NEEDS), ("commbench", COMMBENCH_NEEDS)):
        missing = [c for c in needed if not tables[name].empty and c not in tables[name]]
        if missing:
            raise UserError(
                f"{path}/{name}.parquet is not a ddlbench {name} table (no {', '.join(missing)} "
                f"column): give a run directory written by `ddlbench run`/`sweep`/`commbench`"
            )
    return RunTables(path=path, **tables)


SUMMARY_NEEDS = ("cell_id", "status", "workload", "scheme", "workers")
"""Columns every reader of a summary relies on (the full contract: harness.core.schema.SUMMARY_COLUMNS)."""
COMMBENCH_NEEDS = ("collective", "workers", "size_bytes", "time_s", "network")
