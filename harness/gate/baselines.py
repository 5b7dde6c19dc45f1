"""Stored baselines for the regression gate: a run's tables frozen under a name.

    ddlbench baseline save cpu-tiny results/base-1 results/base-2 results/base-3   # 3 runs of one sweep
    ddlbench baseline list
    ddlbench compare cpu-tiny results/<new-run-id>

    results/baselines/<name>/
        summary.parquet raw.parquet environment.parquet [commbench.parquet]   (copies of the first run's)
        rounds/2/ ... rounds/R/   the same tables of the other runs of the sweep, when saved from several
        sweep.yaml      the sweep that produced it, when the run kept one (CI re-runs it)
        meta.json       name, source runs, date, environment fingerprint, cell counts, rounds

A baseline directory is itself a loadable run directory (`load_run` reads its first run), so `report`
takes it wherever it takes a run; `load_rounds` gives every run, which `compare` uses to know each
cell's run-to-run spread (docs/ARCHITECTURE.md, "Regression gate").
"""

from __future__ import annotations

import datetime
import json
import os
import re
import shutil
from pathlib import Path

import pandas as pd

from harness.core.atomic import write_json_atomic, write_parquet_atomic
from harness.core.errors import UserError
from harness.gate.comparable import check_environments
from harness.gate.compare import measured_cells
from harness.gate.keys import cell_key
from harness.results.files import check_output_dir, unwritable
from harness.results.machine_load import busy_reason
from harness.results.paths import RESULTS_ROOT
from harness.results.store import load_run

DEFAULT_ROOT = RESULTS_ROOT / "baselines"
_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_FILES = ("summary.parquet", "raw.parquet", "environment.parquet", "commbench.parquet", "sweep.yaml")


def baselines_root(root: str | Path | None = None) -> Path:
    """Where baselines live: --dir, else $DDLBENCH_BASELINES, else results/baselines (relative to cwd)."""
    return Path(root or os.environ.get("DDLBENCH_BASELINES") or DEFAULT_ROOT)


def check_name(name: str, what: str = "baseline name") -> str:
    """A name that is safe as one path component (no '/', no '..'): baselines and sweep runs."""
    if not isinstance(name, str) or not _NAME.match(name):
        raise UserError(f"{what} {name!r} is not allowed: use 1-64 letters, digits, '-' or '_' (e.g. cpu-tiny)")
    return name


def save_baseline(name: str, run, root: str | Path | None = None, force: bool = False) -> Path:
    """Copy the tables of RUN (one run, or several runs of one sweep: rounds) to <root>/<name>/ with a
    meta.json; refuse to overwrite, to store a run measured on a busy machine (docs/ARCHITECTURE.md,
    "Measurement hygiene") unless force, or to mix runs of different sweeps or machines."""
    check_name(name)
    runs = [run] if isinstance(run, (str, Path)) else list(run)
    if not runs:
        raise UserError("baseline save needs at least one run directory")
    all_tables = [_checked_run(r, force) for r in runs]
    ids = [run_identity(t) for t in all_tables]
    if len(set(ids)) < len(ids):
        raise UserError(
            "the same run was given twice: a baseline's rounds are separate runs of one sweep "
            "(e.g. results/base-1 results/base-2 results/base-3)"
        )
    tables = all_tables[0]
    for other in all_tables[1:]:
        _check_same_sweep(tables, other)
    dest = baselines_root(root) / name
    check_output_dir(dest.parent, "baselines directory (--dir)")
    if dest.exists() and not force:
        raise UserError(f"baseline {name!r} already exists at {dest}: pick another name or pass --force to replace it")
    environment = tables.environment
    fingerprints = sorted(
        {f for t in all_tables if "fingerprint" in t.environment for f in t.environment["fingerprint"]}
    )
    measured = measured_cells(tables.summary)
    meta = {
        "name": name,
        "source_run": str(tables.path),
        "source_runs": [str(t.path) for t in all_tables],
        "rounds": len(all_tables),
        "created_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "run_created_utc": str(environment["created_utc"].iloc[0])
        if "created_utc" in environment and len(environment)
        else "",
        "fingerprint": ",".join(fingerprints),
        "git_commit": str(environment["git_commit"].iloc[0])
        if "git_commit" in environment and len(environment)
        else "",
        "cells": len(measured),
        "cells_ok": int((measured["status"] == "ok").sum()),
        "workloads": sorted(set(measured["workload"].dropna())),
        "schemes": sorted(set(measured["scheme"].dropna())),
    }
    try:
        _store([t.path for t in all_tables], dest, meta)
    except OSError as e:
        raise unwritable(e, f"baseline {name!r}", f"check the baselines directory {dest.parent}") from None
    return dest


def _checked_run(run, force: bool):
    tables = load_run(run)
    if tables.summary.empty:
        raise UserError(f"run {tables.path} has no summary table: a baseline needs measured cells")
    if tables.raw.empty:
        raise UserError(
            f"run {tables.path} has no raw.parquet: the gate needs per-iteration samples; re-run or resume the sweep"
        )
    busy = [why for why in map(busy_reason, (r for _, r in tables.environment.iterrows())) if why]
    if busy and not force:
        raise UserError(
            f"refusing to store a baseline from a busy machine: while {tables.path} was measured, "
            f"{busy[0]}; re-run it with nothing else running, or pass --force to store it anyway"
        )
    return tables


def _check_same_sweep(first, other) -> None:
    """Rounds must be runs of one sweep on one machine kind: the same measured cells, alike environments."""
    keys = [{cell_key(r) for _, r in measured_cells(t.summary).iterrows()} for t in (first, other)]
    if keys[0] != keys[1]:
        extra = len(keys[1] - keys[0])
        missing = len(keys[0] - keys[1])
        raise UserError(
            f"run {other.path} is not a run of the same sweep as {first.path} ({missing} of its "
            f"cells missing, {extra} others): a baseline's rounds are complete runs of one sweep; "
            f"resume the incomplete run (`ddlbench sweep ... --resume`) or leave it out"
        )
    backends = {str(b) for b in measured_cells(first.summary)["backend"].dropna()}
    try:
        check_environments(first.environment, other.environment, backends)
    except UserError as e:
        raise UserError(
            f"runs {first.path} and {other.path} cannot be rounds of one baseline: "
            f"{str(e).removeprefix('refusing to compare ')}"
        ) from None


def run_identity(tables) -> tuple:
    """What makes a run itself wherever its tables were copied (a baseline holds copies): its path when it
    recorded no environment, else its run ids and start times."""
    environment = tables.environment
    if environment is None or environment.empty or "run_id" not in environment:
        return (str(tables.path.resolve()),)
    created = environment["created_utc"] if "created_utc" in environment else pd.Series(dtype=str)
    return (tuple(sorted(map(str, set(environment["run_id"])))), tuple(sorted(map(str, set(created)))))


def load_rounds(path: str | Path) -> list:
    """Every run stored in a baseline (its first run, then rounds/2 ...), or [the run] for a run directory."""
    first = load_stored(path)
    extra = (
        sorted(
            (d for d in (first.path / "rounds").glob("*") if d.is_dir() and d.name.isdigit()), key=lambda d: int(d.name)
        )
        if (first.path / "rounds").is_dir()
        else []
    )
    return [first, *(load_run(d, fix=_save_again(first.path)) for d in extra)]


def load_stored(path: str | Path):
    """A run directory, or a stored baseline's first run, as load_run reads it; a torn table of a baseline is told
    to save the baseline again (it has no cells/ to rebuild it from, and no run to resume)."""
    path = Path(path)
    return load_run(path, fix=_save_again(path) if (path / "meta.json").is_file() else "")


def _save_again(baseline: Path) -> str:
    """How to make a stored baseline again: `baseline save` from the runs it was saved from (its meta.json)."""
    try:
        runs = " ".join(json.loads((baseline / "meta.json").read_text())["source_runs"])
    except (OSError, ValueError, KeyError, TypeError):
        runs = "RUN..."
    return (
        f"save the baseline again from its runs: `ddlbench baseline save {baseline.name} {runs} --force "
        f"--dir {baseline.parent}`"
    )


def _store(run_dirs: list[Path], dest: Path, meta: dict) -> None:
    """Copy the runs' files into a hidden directory beside dest (the first at its top, the others under
    rounds/2 ...), then swap it in."""
    tmp = dest.with_name(f".{dest.name}.tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        for k, run_dir in enumerate(run_dirs, start=1):
            where = tmp if k == 1 else tmp / "rounds" / str(k)
            where.mkdir(parents=True, exist_ok=True)
            for f in _FILES:
                if (run_dir / f).exists() and (k == 1 or f != "sweep.yaml"):
                    shutil.copy2(run_dir / f, where / f)
            _strip_machine_paths(where / "environment.parquet")
        write_json_atomic(tmp / "meta.json", meta, indent=2)
        if dest.exists():
            shutil.rmtree(dest)
        os.replace(tmp, dest)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _strip_machine_paths(environment_file: Path) -> None:
    """A baseline is meant to be committed: the package path it ran from becomes relative to the working
    directory (e.g. `harness`), or just the package's folder name when it was installed elsewhere."""
    if not environment_file.exists():
        return
    environment = pd.read_parquet(environment_file)
    if "package_path" not in environment:
        return

    def rel(v):
        p = Path(str(v))
        if not p.is_absolute():
            return v
        try:
            return str(p.relative_to(Path.cwd().resolve()))
        except ValueError:
            return p.name

    environment["package_path"] = environment["package_path"].map(rel)
    write_parquet_atomic(
        environment, environment_file
    )  # docs/ARCHITECTURE.md, "Tidy tables": only through core/atomic.py


def list_baselines(root: str | Path | None = None) -> list[dict]:
    """meta.json of every stored baseline, by name."""
    base = baselines_root(root)
    out = []
    for d in sorted(base.glob("*/meta.json")) if base.is_dir() else []:
        try:
            meta = json.loads(d.read_text())
        except (OSError, ValueError):
            meta = {"name": d.parent.name, "note": "unreadable meta.json"}
        meta.setdefault("name", d.parent.name)
        out.append(meta)
    return out


def resolve(ref: str | Path, root: str | Path | None = None) -> Path:
    """A run directory, a stored baseline name, or a run id under results/ -> its directory."""
    p = Path(ref)
    if p.is_dir():
        return p
    base = baselines_root(root)
    if _NAME.match(str(ref)) and (base / str(ref)).is_dir():
        return base / str(ref)
    if (RESULTS_ROOT / str(ref)).is_dir():
        return RESULTS_ROOT / str(ref)
    known = ", ".join(m["name"] for m in list_baselines(root)) or "none stored"
    raise UserError(
        f"{str(ref)!r} is neither a run directory nor a stored baseline (baselines in {base}: "
        f"{known}); give a path, or save one with `ddlbench baseline save NAME RUN`"
    )
