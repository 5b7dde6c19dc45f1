"""Before a resume, every cell's parts sound again (docs/ARCHITECTURE.md, "Results"; harness/experiment/execute.py).

    for line in repair_parts(run_dir, [cell.cell_id for cell in cells]):
        warn(line)          # one line per part restored or cell to measure again, per foreign folder skipped

A cell's parts (cells/<cell-id>/summary.parquet and raw.parquet) and the run's tables hold the same rows:
store.consolidate copies the parts into the tables after every cell. So a torn or missing part of a cell the
run's tables hold is written again from them, and nothing is measured again; only a cell that neither side
holds intact is left for the resume to measure again; a torn table is rebuilt from the parts afterwards
(store.rebuild). A folder under cells/ that is no cell of the run is named and skipped (store.cell_parts).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from harness.core.atomic import write_parquet_atomic
from harness.results import store
from harness.results.files import unwritable
from harness.results.summarize import SCALING_COLUMNS


def repair_parts(run_dir: Path, known=()) -> list[str]:
    """Restore each torn or missing part of the run's cells from the run's tables, or remove what cannot be
    restored so that the resume measures that cell again; `known`: the cells the resume runs. Returns one line
    per thing done or skipped, saying which case applied."""
    parts, foreign = store.cell_parts(run_dir, set(known))
    lines = [
        f"skipped {d}: not a cell of this run (no summary of it, no cell.json); move it out of {run_dir / 'cells'}"
        for d in foreign
    ]
    read: dict[str, pd.DataFrame | None] = {}

    def table(name: str) -> pd.DataFrame | None:  # read once, and only when a part needs it (raw: the large one)
        if name not in read:
            read[name] = store.readable(run_dir / f"{name}.parquet")
        return read[name]

    try:
        for d, summary in parts.items():
            lines += _repair_cell(run_dir, d, summary, table)
    except OSError as e:
        raise unwritable(e, f"run directory {run_dir}", "make it writable, then resume again") from None
    return lines


def _rows(table: pd.DataFrame | None, cell_id: str) -> pd.DataFrame | None:
    """The rows of one cell in a run's table (None: the table is missing or torn, or does not hold the cell)."""
    if table is None or "cell_id" not in table:
        return None
    rows = table[table["cell_id"] == cell_id]
    return rows.reset_index(drop=True) if len(rows) else None


def _repair_cell(run_dir: Path, d: Path, summary: pd.DataFrame | None, table) -> list[str]:
    summary_part, raw_part = d / "summary.parquet", d / "raw.parquet"
    said = []
    if summary is None:
        if not summary_part.exists() and not raw_part.exists():
            return []  # not measured yet (or stopped before it was recorded): the resume runs it, as ever
        copy = _rows(table("summary"), d.name)
        if copy is None:
            if not summary_part.exists():
                return []  # its samples were written, its summary was not: the resume runs it again, as ever
            summary_part.unlink()
            raw_part.unlink(missing_ok=True)
            return [
                f"{summary_part} is torn and {run_dir / 'summary.parquet'} does not hold the cell: it is measured again"
            ]
        said.append(
            f"{summary_part} {_how(summary_part)}: restored from {run_dir / 'summary.parquet'} (nothing measured again)"
        )
        write_parquet_atomic(copy.drop(columns=[c for c in SCALING_COLUMNS if c in copy]), summary_part)
        summary = copy
    measured = (summary["status"] == "ok").any()
    if store.readable(raw_part) is not None or not (measured or raw_part.exists()):
        return said  # its samples are sound, or it has none (a failed cell)
    copy = _rows(table("raw"), d.name)
    if copy is not None:
        said.append(f"{raw_part} {_how(raw_part)}: restored from {run_dir / 'raw.parquet'} (nothing measured again)")
        write_parquet_atomic(copy, raw_part)
    elif measured:  # its samples are nowhere: the cell is measured again
        said = [
            f"{raw_part} {_how(raw_part)} and {run_dir / 'raw.parquet'} does not hold the cell's samples: it "
            f"is measured again"
        ]
        summary_part.unlink()
        raw_part.unlink(missing_ok=True)
    else:
        raw_part.unlink()
        said.append(f"{raw_part} is torn: removed (a failed cell's samples are not used)")
    return said


def _how(part: Path) -> str:
    return "is torn" if part.exists() else "is missing"
