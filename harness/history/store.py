"""The history folder on disk: an append-only Parquet dataset, one file per batch of rows.

    DIR/
        runs/<utc time>-<pid>-<uuid>.parquet   one per `history add` (rows.COLUMNS), never rewritten
        annotations.yaml                       triage, kept in the repository (annotations.py)
        .cache/                                the detector's per-series results and null penalties (scan.py)

A batch is written to a hidden temporary name in runs/ and renamed (harness/core/atomic.py), under a name no
other writer can take (time, process id and a random uuid), so two CI jobs appending at once lose nothing and
a reader never sees half a file. Adders take turns (`adding`: a lock on runs/), so a run given to two at once
is added by one and found by the other. The files are read as one pyarrow dataset (`read`); a number column
newer than every file read (e.g. `precision_reached`) reads as NaN. A file that cannot
be read (torn by a crash of a copy, not a history file, or written by a newer ddlbench) is named in a one-line
problem and skipped; the rest stays readable. A run added twice all the same (two folders merged) is kept once.
"""

from __future__ import annotations

import contextlib
import datetime
import errno
import fcntl
import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
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
        raise UserError(f"--history {path} is a file, not a history folder: give a directory (e.g. --history history/)")
    if must_exist and not runs_dir(path).is_dir():
        raise UserError(
            f"--history {path} holds no history (no {RUNS}/ folder): add runs first with "
            f"`ddlbench history add RUN --history {path}`"
        )
    return path


@contextlib.contextmanager
def adding(history: str | Path) -> Iterator[Path]:
    """One adder at a time per history folder, for as long as it reads which runs the folder holds and appends
    the others: an exclusive flock(2) on the runs/ folder itself, waited for (an add takes seconds; a CI job
    refused would fail). Not results/lock.run_lock, which refuses a second writer and leaves a `.lock` file:
    a history folder is versioned. The kernel drops the lock however its holder ends, SIGKILL included."""
    path = check_history(history, must_exist=False)
    try:
        runs_dir(path).mkdir(parents=True, exist_ok=True)
        fd = os.open(runs_dir(path), os.O_RDONLY | os.O_DIRECTORY)
    except OSError as e:
        raise unwritable(e, f"history folder {path}", "make it writable or give another --history") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield path
    finally:
        os.close(fd)  # closing the descriptor releases the flock


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
        fix = "free space on its disk" if e.errno == errno.ENOSPC else "make it writable"
        raise unwritable(e, f"history folder {path}", f"{fix} or give another --history") from None


def files(history: str | Path) -> list[Path]:
    return sorted(p for p in runs_dir(history).glob("*.parquet") if not p.name.startswith("."))


REPEATED = (
    "series",
    "cell_key",
    "cell",
    "workload",
    "scheme",
    "backend",
    "sample_unit",
    "fingerprint",
    "fingerprint_fields",
    "run_key",
    "run_id",
    "commit",
    "commit_reason",
    "status",
    "reason",
    "load",
)
"""Columns whose values repeat over thousands of rows (a cell's key in every run, a run's key in every cell):
read as dictionaries (as Parquet stores them) and so as categoricals, a million rows in tens of MB instead of
a GB. Times (`run_utc`) stay strings: they are sorted."""


def _check(path: Path) -> tuple[pa.Schema | None, str]:
    """The file's schema from its footer, or the problem when it is no Parquet file or no history file."""
    try:
        schema = pq.read_schema(path)
    except Exception as e:  # a torn or foreign file: pyarrow raises several kinds
        return None, f"{path} is not a readable Parquet file ({str(e).splitlines()[0][:120]}); {_torn_fix(path)}"
    missing = [c for c in REQUIRED if c not in schema.names]
    if missing:
        return None, f"{path} is not a history file (no {', '.join(missing)} column); move it out of {path.parent}"
    return schema, ""


def _torn_fix(path: Path) -> str:
    """A torn batch: its runs are missing from the history until it is restored or they are added again."""
    return (
        f"restore it from a copy, or move it out of {path.parent} and add its runs again "
        f"(`ddlbench history add RUN --history {path.parent.parent}`)"
    )


def _dataset(schemas: dict[Path, pa.Schema]) -> ds.Dataset:
    """The files as one dataset: their schemas unified (a column an older file lacks reads as nulls), the
    REPEATED columns read as dictionaries."""
    unified = pa.unify_schemas(list(schemas.values()))
    fields = [pa.field(f.name, pa.dictionary(pa.int32(), f.type)) if f.name in REPEATED else f for f in unified]
    fmt = ds.ParquetFileFormat(read_options=ds.ParquetReadOptions(dictionary_columns=REPEATED))
    return ds.dataset([str(f) for f in schemas], schema=pa.schema(fields, unified.metadata), format=fmt)


def _blame(data: ds.Dataset, columns: list[str], where) -> dict[Path, str]:
    """The files that failed the dataset's read (torn past their footer: the read does not say which) or hold
    rows of a newer schema, each with its problem: read one by one, only when the whole read found either."""
    out = {}
    for fragment in data.get_fragments():
        path = Path(fragment.path)
        try:
            table = fragment.to_table(schema=data.schema, columns=columns, filter=where)
        except Exception as e:
            out[path] = f"{path} is torn ({str(e).splitlines()[0][:120]}); {_torn_fix(path)}"
            continue
        newest = pc.max(table["schema_version"]).as_py() if table.num_rows else None
        if newest is not None and newest > SCHEMA_VERSION:
            out[path] = (
                f"{path} was written by a newer ddlbench (history schema {newest} > {SCHEMA_VERSION}): "
                f"upgrade ddlbench to read it"
            )
    return out


def read(history: str | Path, columns: list[str] | None = None, series=None) -> tuple[pd.DataFrame, list[str]]:
    """Every readable row (a run added twice: its first file's rows; only `columns`, only the rows of
    `series` when given) and one line per file skipped, saying what is wrong and how to fix it. The files
    that pass the footer's check are read as one pyarrow dataset (in file order); a file the read fails on,
    or one of a newer schema, is then found, named and left out, and the rest read again."""
    path = check_history(history)
    columns = list(dict.fromkeys([*REQUIRED, *(columns or COLUMNS)]))
    where = pc.field("series").isin(sorted(series)) if series is not None else None
    order = files(path)
    checked = {f: _check(f) for f in order}
    schemas = {f: schema for f, (schema, problem) in checked.items() if not problem}
    problems = {f: problem for f, (_, problem) in checked.items() if problem}
    while schemas:
        data = _dataset(schemas)
        wanted = [c for c in columns if c in data.schema.names]
        try:
            table = data.to_table(columns=wanted, filter=where)
        except Exception:  # a file torn past its footer
            blamed = _blame(data, wanted, where)
            if not blamed:
                raise
        else:
            if not table.num_rows or pc.max(table["schema_version"]).as_py() <= SCHEMA_VERSION:
                break
            blamed = _blame(data, wanted, where)  # finds them: the same files, columns and filter
        problems.update(blamed)
        schemas = {f: s for f, s in schemas.items() if f not in blamed}
    else:
        table = None
    skipped = [f"skipped {problems[f]}" for f in order if f in problems]
    if table is None or not table.num_rows:
        return as_rows(pd.DataFrame()).loc[:, [c for c in COLUMNS if c in columns]], skipped
    rows = table.to_pandas()  # dictionaries unified: categoricals
    rows = rows.drop_duplicates(["run_key", "cell_key"], keep="first").reset_index(drop=True)
    newer = [c for c in columns if c not in rows and COLUMNS.get(c) == "float64"]  # added since the files: NaN
    return rows.assign(**dict.fromkeys(newer, float("nan"))), skipped


def known_runs(history: str | Path) -> set[str]:
    """run_key of every run already in the history (empty for a new folder)."""
    if not runs_dir(history).is_dir():
        return set()
    rows, _ = read(history, columns=["run_key"])
    return set(rows["run_key"])
