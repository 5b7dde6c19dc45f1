"""The history folder on disk: an append-only Parquet dataset, one file per batch of rows.

    DIR/
        runs/<utc time>-<pid>-<uuid>.parquet   one per `history add` (rows.COLUMNS), never rewritten
        annotations.yaml                       triage, kept in the repository (annotations.py)
        .cache/                                the detector's per-series results and null penalties (scan.py)

A batch is written to a hidden temporary name in runs/ and renamed (harness/core/atomic.py), under a name no
other writer can take (time, process id and a random uuid), so two CI jobs appending at once lose nothing and
a reader never sees half a file. A file that cannot be read (torn by a crash of a copy, or not a history
file) is named in a one-line problem and skipped; the rest stays readable. A run added twice is kept once.
"""

from __future__ import annotations

import datetime
import os
import uuid
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from harness.core.atomic import write_parquet_atomic
from harness.core.errors import UserError
from harness.history.rows import COLUMNS, REQUIRED, SCHEMA_VERSION, as_rows
from harness.results.files import unwritable

RUNS = "runs"


def runs_dir(history: str | Path) -> Path:
    return Path(history) / RUNS


def check_history(history: str | Path, must_exist: bool = True) -> Path:
    """The history folder, or a UserError saying what is wrong with the given path."""
    path = Path(history)
    if path.exists() and not path.is_dir():
        raise UserError(f"--history {path} is a file, not a history folder: give a directory "
                        f"(e.g. --history history/)")
    if must_exist and not runs_dir(path).is_dir():
        raise UserError(f"--history {path} holds no history (no {RUNS}/ folder): add runs first with "
                        f"`ddlbench history add RUN --history {path}`")
    return path


def batch_name() -> str:
    """A file name no other writer can take: time first (files list in the order they were added)."""
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%S%fZ")
    return f"{now}-{os.getpid()}-{uuid.uuid4().hex[:12]}.parquet"


def append(rows: pd.DataFrame, history: str | Path) -> Path | None:
    """Write one batch of rows as a new file of the dataset (None when there is nothing to write)."""
    path = check_history(history, must_exist=False)
    if rows.empty:
        return None
    target = runs_dir(path) / batch_name()
    try:
        return write_parquet_atomic(as_rows(rows), target)
    except OSError as e:
        raise unwritable(e, f"history folder {path}", "make it writable or give another --history") from None


def files(history: str | Path) -> list[Path]:
    return sorted(p for p in runs_dir(history).glob("*.parquet") if not p.name.startswith("."))


REPEATED = ("series", "cell_key", "cell", "workload", "scheme", "backend", "sample_unit", "fingerprint",
            "fingerprint_fields", "run_key", "run_id", "commit", "commit_reason", "status", "reason", "load")
"""Columns whose values repeat over thousands of rows (a cell's key in every run, a run's key in every cell):
read as dictionaries (as Parquet stores them) and so as categoricals, a million rows in tens of MB instead of
a GB. Times (`run_utc`) stay strings: they are sorted."""


def _read_one(path: Path, columns: list[str], series=None) -> tuple[pa.Table | None, str]:
    try:
        schema = pq.read_schema(path)
    except Exception as e:  # a torn or foreign file: pyarrow raises several kinds
        return None, f"{path} is not a readable Parquet file ({str(e).splitlines()[0][:120]})"
    missing = [c for c in REQUIRED if c not in schema.names]
    if missing:
        return None, f"{path} is not a history file (no {', '.join(missing)} column)"
    try:
        where = [("series", "in", sorted(series))] if series is not None else None
        wanted = [c for c in columns if c in schema.names]
        table = pq.read_table(path, columns=wanted, filters=where, read_dictionary=[c for c in REPEATED if c in wanted])
    except Exception as e:
        return None, f"{path} is torn ({str(e).splitlines()[0][:120]})"
    newest = pc.max(table["schema_version"]).as_py() if table.num_rows else None
    if newest is not None and newest > SCHEMA_VERSION:
        return None, (f"{path} was written by a newer ddlbench (history schema {newest} > {SCHEMA_VERSION}): "
                      f"upgrade ddlbench")
    return table, ""


def read(history: str | Path, columns: list[str] | None = None, series=None) -> tuple[pd.DataFrame, list[str]]:
    """Every readable row (a run added twice: its first file's rows; only `columns`, only the rows of
    `series` when given) and one line per file skipped, saying what is wrong and how to fix it."""
    path = check_history(history)
    columns = list(dict.fromkeys([*REQUIRED, *(columns or COLUMNS)]))
    tables, problems = [], []
    for f in files(path):
        table, problem = _read_one(f, columns, series)
        if problem:
            problems.append(f"skipped {problem}; move it out of {runs_dir(path)} or restore it from a copy")
        elif table.num_rows:
            tables.append(table)
    if not tables:
        return as_rows(pd.DataFrame()).loc[:, [c for c in COLUMNS if c in columns]], problems
    rows = pa.concat_tables(tables, promote_options="default").to_pandas()  # dictionaries unified: categoricals
    rows = rows.drop_duplicates(["run_key", "cell_key"], keep="first").reset_index(drop=True)
    return rows, problems


def known_runs(history: str | Path) -> set[str]:
    """run_key of every run already in the history (empty for a new folder)."""
    if not runs_dir(history).is_dir():
        return set()
    rows, _ = read(history, columns=["run_key"])
    return set(rows["run_key"])
