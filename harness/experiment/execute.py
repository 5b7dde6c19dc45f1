"""Run cells and sweeps into a run directory (plain functions; the CLI and the tests call these).

A failed or hung cell is recorded with its reason and log tail and the sweep goes on; every finished
cell is on disk before the next starts; `resume` repairs torn cell parts from the run's tables
(harness/results/repair.py) and skips cells already recorded. One writer per run
directory (harness.results.lock). SIGTERM or SIGINT to the driver ends the running cell's ranks, records
the cell as interrupted (run again by --resume) and raises Interrupted (harness/core/errors.py) naming the
run directory; earlier cells stay on disk.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from harness import backends
from harness.contracts.cell import CellSpec
from harness.contracts.launcher import LaunchCell, Launcher, LaunchRequest
from harness.contracts.placement import Placement
from harness.core.atomic import write_parquet_atomic, write_text_atomic
from harness.core.errors import CellFailed, Interrupted, signals_raise
from harness.experiment.cells import warn
from harness.experiment.options import RunOptions
from harness.launchers.choose import this_box
from harness.procs.logs import log_tail
from harness.results import environment, machine_load, store
from harness.results.files import unwritable
from harness.results.lock import run_lock
from harness.results.repair import repair_parts
from harness.results.summarize import failed_row, raw_rows, summary_row
from harness.warm import spawn
from workloads import WORKLOADS


def _unit(cell: CellSpec) -> str:
    return WORKLOADS.get(cell.workload).sample_unit


def record_result(run_dir: Path, run_id: str, cell: CellSpec, result: dict, wall_s: float) -> dict:
    raw = raw_rows(run_id, cell.cell_id, result)
    row = summary_row(run_id, cell, result, _unit(cell), wall_s)
    store.save_cell(run_dir, cell.cell_id, raw, row)
    return row


def _this_box() -> Launcher:
    return this_box(LaunchRequest(os.environ))


def execute_cell(
    cell: CellSpec, run_dir: Path, run_id: str, placement: Placement | None = None, launch: LaunchCell | None = None
) -> dict:
    """Launch one cell (by `launch`, a launcher's; None: this box's launcher) and record it (ok or failed).
    Returns the summary row."""
    d = store.cell_dir(run_dir, cell.cell_id)
    t0 = time.monotonic()
    launch = launch or _this_box().launch
    try:
        result_path = launch(cell, d, placement)
        result = json.loads(Path(result_path).read_text())
    except CellFailed as e:
        row = failed_row(run_id, cell, e.reason, e.log_tail, _unit(cell), time.monotonic() - t0)
        store.save_cell(run_dir, cell.cell_id, None, row)
        return row
    except Interrupted as e:  # the launcher's `finally` has killed the ranks; say so, then stop
        reason = f"{store.INTERRUPTED} by {e} after {time.monotonic() - t0:.0f} s (run again by --resume)"
        row = failed_row(run_id, cell, reason, log_tail(d), _unit(cell), time.monotonic() - t0)
        store.save_cell(run_dir, cell.cell_id, None, row)
        e.stopped = "the running cell's ranks were stopped and the cell recorded as interrupted"
        raise
    return record_result(run_dir, run_id, cell, result, time.monotonic() - t0)


def write_environment(
    run_dir: Path, run_id: str, device: str, extra: dict | None = None, sample_load: bool = True
) -> None:
    """The run's environment row; with `sample_load`, the machine's load over the next second (blocking:
    for commands that measure no cells; run_cells records the load around its cells instead)."""
    libraries = {name: entry.library for name, entry in backends.load().items() if entry.library}
    env = environment.collect(run_id, device=device, extra=extra, sample_load=sample_load, libraries=libraries)
    try:
        write_parquet_atomic(environment.to_frame(env), run_dir / "environment.parquet")
    except OSError as e:
        raise unwritable(e, f"run directory {run_dir}", "choose a writable --output or fix its permissions") from None


def run_cells(
    cells: list[CellSpec],
    run_dir: Path,
    options: RunOptions = RunOptions(),
    launcher: Launcher | None = None,
    *,
    new_run: bool = False,
    files: dict[str, str] | None = None,
    run_id: str | None = None,
) -> list[dict]:
    """The one function that runs cells into a run directory (the one sweep path, harness/experiment/dispatch.py,
    and doctor call it): lock the directory (one writer); with `new_run`, refuse or clear a run already there
    (store.prepare_run, by `options.resume` and `options.overwrite`) and write `files` (name -> text,
    atomically: the sweep file); then run the cells in order with a progress bar, skipping those already
    recorded when resuming (except the failed ones with `options.retry_failed`: their rows are replaced,
    measured cells are never touched).

    `launcher` (harness/contracts/launcher.py; None: this box's, harness/launchers/choose.this_box) starts each
    cell by its `launch`, inside its `session()`, entered under the lock around the cells (the multi-node
    leader's store, the testbed's lease). Ranks are warm (forked from a pre-imported zygote: this box's, started
    at once unless the launcher starts its ranks elsewhere, or the srun launcher's on each node;
    harness/warm/spawn.py) unless `options.cold`; the environment table records which (`warm_ranks`)."""
    run_id = run_id or run_dir.name
    launcher = launcher or _this_box()
    env_extra = {**launcher.env_extra, "warm_ranks": not options.cold}
    with run_lock(run_dir), signals_raise(run_dir), spawn.warm_ranks(not options.cold, here=launcher.warm):
        if new_run:
            store.prepare_run(run_dir, options.resume, options.overwrite)
            _write_files(run_dir, files or {})
        with launcher.session():
            return _run_in(cells, run_dir, run_id, options, env_extra, launcher.launch)


def _write_files(run_dir: Path, files: dict[str, str]) -> None:
    try:
        for name, text in files.items():
            write_text_atomic(run_dir / name, text)
    except OSError as e:
        raise unwritable(e, f"run directory {run_dir}", "choose a writable --output") from None


def _run_in(cells, run_dir, run_id, options: RunOptions, env_extra, launch) -> list[dict]:
    repaired = repair_parts(run_dir, [c.cell_id for c in cells]) if options.resume else []
    for line in repaired:  # a torn part restored from the tables, or its cell measured again; a foreign folder
        warn(line)
    done = store.finished_cells(run_dir, include_failed=not options.retry_failed) if options.resume else set()
    if done or repaired:  # rebuild the run's tables from its parts: a damaged or missing table comes back
        store.rebuild(run_dir)
    load = machine_load.Watch(run_dir)  # the load around the cells (docs/ARCHITECTURE.md, "Measurement hygiene")
    environment_table = run_dir / "environment.parquet"
    resumed = options.resume and store.readable(environment_table) is not None
    if options.resume and not resumed and environment_table.exists():  # no cell holds it: recorded anew
        warn(
            f"{environment_table} is torn: recorded again now (the run's start time, commit and versions are "
            f"this resume's)"
        )
    if not resumed:
        write_environment(run_dir, run_id, cells[0].device if cells else "cpu", env_extra, sample_load=False)

    def after_cell() -> None:
        start = load.mark()
        if start and not resumed:  # recorded at once: a run killed later keeps it
            environment.record_load(run_dir, start)

    todo = [c for c in cells if c.cell_id not in done]
    rows = _run_todo(todo, len(cells), run_dir, run_id, options.progress, launch, after_cell)
    if todo or not resumed:  # a resume that measured nothing keeps the load recorded around the cells (its own
        environment.record_load(run_dir, load.finish(), merge=resumed)  # window, waited for, would describe none)
    return rows


def _run_todo(todo, total, run_dir, run_id, progress, launch, after_cell) -> list[dict]:
    rows = []
    columns = [TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn()]
    with Progress(*columns, disable=not progress, transient=False) as bar:
        task = bar.add_task("cells", total=total, completed=total - len(todo))
        for cell in todo:
            bar.update(task, description=f"{cell.workload} {cell.scheme} w{cell.workers}")
            row = execute_cell(cell, run_dir, run_id, None, launch)
            rows.append(row)
            after_cell()
            if row["status"] != "ok":
                bar.console.print(f"[red]failed[/red] {cell.cell_id}: {row['reason']}")
            elif row["reason"]:  # measured, but a rank failed while shutting down
                bar.console.print(f"[yellow]measured[/yellow] {cell.cell_id}, {row['reason']}")
            bar.advance(task)
    return rows
