"""What runs `ddlbench advise`'s tries: one sweep file per candidate and try, run through `ddlbench sweep`'s
own function into the run directory, and the time spent so far kept beside them (RUN/advise/budget.json),
so that a --resume counts it against the budget (harness/advise/budget.py)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml

from harness.advise.budget import Budget
from harness.advise.candidates import Candidate, sweep_mapping
from harness.core.atomic import write_text_atomic
from harness.core.errors import UserError
from harness.experiment.dispatch import run_sweep_file
from harness.experiment.options import RunOptions


def _slug(label: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", label).strip("-")


def sweep_runner(base: dict, sweeps: Path, progress: bool, oversubscribe: bool):
    """run(candidate, iters, run_dir) over `ddlbench sweep`'s function: writes the candidate's sweep file
    (kept: it reproduces that cell) and runs it into run_dir, skipping what is already there."""

    def run(c: Candidate, iters: int, run_dir: Path) -> None:
        path = sweeps / f"{_slug(c.label)}-i{iters}.yaml"
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            write_text_atomic(path, yaml.safe_dump(sweep_mapping(c, base, iters, "advise"), sort_keys=False))
        run_sweep_file(path, RunOptions(output=run_dir, resume=True, progress=progress, oversubscribe=oversubscribe))

    return run


def spent_before(keep: Path) -> float:
    """Seconds the earlier invocations of this advise run spent (RUN/advise/budget.json), 0 when none."""
    path = keep / "budget.json"
    try:
        return float(json.loads(path.read_text())["used_s"]) if path.is_file() else 0.0
    except (ValueError, KeyError, TypeError):
        raise UserError(
            f"{path} is damaged: delete it (the time spent before is then not counted) and run "
            f"advise again with --resume"
        ) from None


def keep_spent(keep: Path, budget: Budget) -> None:
    keep.mkdir(parents=True, exist_ok=True)
    write_text_atomic(keep / "budget.json", json.dumps({"budget_s": budget.total_s, "used_s": budget.used_s()}))


def counting(run, budget: Budget, keep: Path):
    """The runner, recording after each try the time spent so far (a --resume counts it)."""

    def counted(c: Candidate, iters: int, run_dir: Path) -> None:
        try:
            run(c, iters, run_dir)
        finally:
            keep_spent(keep, budget)

    return counted
