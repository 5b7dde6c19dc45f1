"""Merge run directories (e.g. one per Slurm job of a sweep) into one: the finished cells of each, their
environment and commbench tables, consolidated (docs/ARCHITECTURE.md, "Results").
"""

from __future__ import annotations

import datetime
import shutil
from pathlib import Path

import pandas as pd

from harness.core.atomic import write_json_atomic, write_parquet_atomic
from harness.core.errors import UserError
from harness.results import store
from harness.results.files import read_table


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def cell_statuses(run: Path) -> dict[str, str]:
    """cell id -> status (ok, failed, ...) of every cell recorded in the run directory (a folder under cells/
    that is no cell of the run skipped; a torn part an error saying how to fix it)."""
    return {d.name: str(part["status"].iloc[0]) for d, part in store.recorded_cells(Path(run)).items()}


def run_dirs(paths: tuple[str, ...]) -> list[Path]:
    """Run directories named, or found one level below (a submit's RUN_DIR holds one per job)."""
    out = []
    for arg in paths:
        p = Path(arg)
        if (p / "cells").is_dir():
            out.append(p)
            continue
        found = sorted(d for d in p.glob("*/") if (d / "cells").is_dir()) if p.is_dir() else []
        if not found:
            raise UserError(
                f"no run directory at {p} (a run directory holds cells/); give run directories "
                f"or the RUN_DIR of `ddlbench slurm submit`"
            )
        out.extend(found)
    return out


def merge_runs(sources: list[Path], merged: Path) -> Path:  # noqa: C901 - refusals in a row, then the merge
    """Merge the finished cells of several run directories into `merged` and consolidate its tables.
    A cell present twice keeps its ok measurement over a failed one, else the later directory's."""
    merged = merged.resolve()
    if any(s.resolve() == merged for s in sources):
        raise UserError(f"{merged} is one of the inputs; give collect a new directory with -o")
    if (merged / "cells").exists() and not (merged / "collected.json").exists():
        raise UserError(f"{merged} already holds a run not made by collect; give another directory with -o")
    chosen: dict[str, tuple[Path, str]] = {}
    for src in sources:
        for cell_id, state in cell_statuses(src).items():
            old = chosen.get(cell_id)
            if old is None or state == "ok" or old[1] != "ok":
                chosen[cell_id] = (store.cell_dir(src, cell_id), state)
    if not chosen:
        raise UserError(
            f"no finished cells in {', '.join(map(str, sources))}; wait for the jobs "
            f"(`ddlbench slurm status`) or resume them"
        )
    if (merged / "cells").exists():
        shutil.rmtree(merged / "cells")
    for cell_id, (src, _) in chosen.items():
        shutil.copytree(src, store.cell_dir(merged, cell_id))
    for table in ("environment", "commbench"):
        frames = [
            read_table(s / f"{table}.parquet", fix=store.table_fix(s, table))
            for s in sources
            if (s / f"{table}.parquet").exists()
        ]
        if frames:
            write_parquet_atomic(pd.concat(frames, ignore_index=True).drop_duplicates(), merged / f"{table}.parquet")
    store.consolidate(merged)
    write_json_atomic(
        merged / "collected.json",
        {
            "collected_utc": _now(),
            "sources": [str(s.resolve()) for s in sources],
            "cells": {c: str(src) for c, (src, _) in sorted(chosen.items())},
        },
        indent=1,
    )
    return merged
