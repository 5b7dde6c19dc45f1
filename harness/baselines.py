"""Stored baselines for the regression gate: a run's tables frozen under a name.

    ddlbench baseline save cpu-tiny results/<run-id>     # -> results/baselines/cpu-tiny/
    ddlbench baseline list
    ddlbench compare cpu-tiny results/<new-run-id>

    results/baselines/<name>/
        summary.parquet raw.parquet environment.parquet [commbench.parquet]   (copies of the run's)
        sweep.yaml      the sweep that produced it, when the run kept one (CI re-runs it)
        meta.json       name, source run, date, environment fingerprint, cell counts

A baseline directory is itself a loadable run directory (`load_run` reads it), so `report` and
`compare` take it wherever they take a run.
"""

from __future__ import annotations

import datetime
import json
import os
import re
import shutil
from pathlib import Path

from harness.atomic import write_json_atomic
from harness.errors import UserError
from harness.results.files import check_output_dir, unwritable
from harness.results.machine_load import busy_reason
from harness.results.store import load_run

DEFAULT_ROOT = Path("results") / "baselines"
_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_FILES = ("summary.parquet", "raw.parquet", "environment.parquet", "commbench.parquet", "sweep.yaml")


def baselines_root(root: str | Path | None = None) -> Path:
    """Where baselines live: --dir, else $DDLBENCH_BASELINES, else results/baselines (relative to cwd)."""
    return Path(root or os.environ.get("DDLBENCH_BASELINES") or DEFAULT_ROOT)


def check_name(name: str, what: str = "baseline name") -> str:
    """A name that is safe as one path component (no '/', no '..'): baselines and sweep runs."""
    if not isinstance(name, str) or not _NAME.match(name):
        raise UserError(f"{what} {name!r} is not allowed: use 1-64 letters, digits, '-' or '_' "
                        f"(e.g. cpu-tiny)")
    return name


def save_baseline(name: str, run: str | Path, root: str | Path | None = None, force: bool = False) -> Path:
    """Copy RUN's tables to <root>/<name>/ with a meta.json; refuse to overwrite, or to store a run
    measured on a busy machine (docs/ARCHITECTURE.md, "Measurement hygiene"), unless force."""
    check_name(name)
    tables = load_run(run)
    if tables.summary.empty:
        raise UserError(f"run {tables.path} has no summary table: a baseline needs measured cells")
    if tables.raw.empty:
        raise UserError(f"run {tables.path} has no raw.parquet: the gate needs per-iteration samples; "
                        f"re-run or resume the sweep")
    busy = [why for why in map(busy_reason, (r for _, r in tables.environment.iterrows())) if why]
    if busy and not force:
        raise UserError(f"refusing to store a baseline from a busy machine: while {tables.path} was measured, "
                        f"{busy[0]}; re-run it with nothing else running, or pass --force to store it anyway")
    dest = baselines_root(root) / name
    check_output_dir(dest.parent, "baselines directory (--dir)")
    if dest.exists() and not force:
        raise UserError(f"baseline {name!r} already exists at {dest}: pick another name or pass --force "
                        f"to replace it")
    env = tables.environment
    fingerprints = sorted(set(env["fingerprint"])) if "fingerprint" in env else []
    summary = tables.summary
    measured = summary[summary["source"].fillna("measured") == "measured"] if "source" in summary else summary
    meta = {
        "name": name,
        "source_run": str(tables.path),
        "created_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "run_created_utc": str(env["created_utc"].iloc[0]) if "created_utc" in env and len(env) else "",
        "fingerprint": ",".join(fingerprints),
        "git_commit": str(env["git_commit"].iloc[0]) if "git_commit" in env and len(env) else "",
        "cells": int(len(measured)),
        "cells_ok": int((measured["status"] == "ok").sum()),
        "workloads": sorted(set(measured["workload"].dropna())),
        "schemes": sorted(set(measured["scheme"].dropna())),
    }
    try:
        _store(tables.path, dest, meta)
    except OSError as e:
        raise unwritable(e, f"baseline {name!r}", f"check the baselines directory {dest.parent}") from None
    return dest


def _store(run_dir: Path, dest: Path, meta: dict) -> None:
    """Copy the run's files into a hidden directory beside dest, then swap it in."""
    tmp = dest.with_name(f".{dest.name}.tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        for f in _FILES:
            if (run_dir / f).exists():
                shutil.copy2(run_dir / f, tmp / f)
        write_json_atomic(tmp / "meta.json", meta, indent=2)
        if dest.exists():
            shutil.rmtree(dest)
        os.replace(tmp, dest)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


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
    if (Path("results") / str(ref)).is_dir():
        return Path("results") / str(ref)
    known = ", ".join(m["name"] for m in list_baselines(root)) or "none stored"
    raise UserError(f"{str(ref)!r} is neither a run directory nor a stored baseline (baselines in {base}: "
                    f"{known}); give a path, or save one with `ddlbench baseline save NAME RUN`")
