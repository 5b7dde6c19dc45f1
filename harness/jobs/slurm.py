"""Sweeps as Slurm jobs: submit one job per node count a sweep's cells need, keep the run directory's
jobs file (RUN_DIR/slurm-jobs.json: ids, parts, last state seen), follow the jobs, collect their parts
(docs/ARCHITECTURE.md, "Launching"). `ddlbench slurm` (harness/cli/commands/slurm.py) is the CLI over this.

A sweep is split by the number of nodes its cells need (workers / workers per node: one per GPU, or
one per node on CPU unless --tasks-per-node says more). Each node count becomes one job (or one
element of a job array) that runs `ddlbench sweep` on its part of the sweep inside the allocation,
writing RUN_DIR/<run>-n<nodes>/; `collect` merges those parts into one run directory.
"""

from __future__ import annotations

import datetime
import json
import re
import shutil
import sys
from pathlib import Path

import pandas as pd
import yaml

from harness.core.atomic import write_json_atomic
from harness.core.errors import UserError
from harness.experiment.sweep import load_sweep
from harness.jobs.client import cpus_per_node, job_states, slurm_tool, submit
from harness.jobs.sweep_jobs import parse_time_min, part_yaml, plan_jobs, render_submit
from harness.results.merge import cell_statuses, merge_runs, run_dirs
from harness.results.paths import default_run_dir

JOBS_FILE = "slurm-jobs.json"
"""Submitted jobs of a run directory, and the last state seen for each."""


# ----------------------------------------------------------------------------------------- submit


def submit_sweep(  # noqa: C901 - the flags' checks in a row, then the submission
    sweep_file: str | Path,
    *,
    nodes: int,
    gpus_per_node: int = 0,
    tasks_per_node: int | None = None,
    cpus_per_task: int | None = None,
    partition: str | None = None,
    time: str | None = None,
    output: Path | None = None,
    array: bool = False,
    sbatch_args: tuple[str, ...] = (),
    dry_run: bool = False,
) -> tuple[Path, list[dict]]:
    """Check, write the parts and job scripts under the run directory, submit. Returns (run dir, jobs)."""
    cfg = load_sweep(sweep_file)
    data = yaml.safe_load(Path(sweep_file).read_text()) or {}
    if nodes < 1:
        raise UserError(f"--nodes must be at least 1, got {nodes}")
    gpu = gpus_per_node > 0 and cfg.device != "cpu"
    if cfg.device == "cuda" and not gpu:
        raise UserError("the sweep runs on cuda but --gpus-per-node is 0; say how many GPUs each node has")
    per_node = tasks_per_node or (gpus_per_node if gpu else 1)
    if gpu and per_node > gpus_per_node:
        raise UserError(
            f"{per_node} workers per node but --gpus-per-node {gpus_per_node}: one worker runs per "
            f"GPU; lower --tasks-per-node or raise --gpus-per-node"
        )
    cpt = cpus_per_task or cfg.threads
    limit = parse_time_min(time) if time else None
    run_dir = (output or default_run_dir(cfg.name)).resolve()
    jobs = plan_jobs(data, run_dir, nodes, per_node, limit)
    if not dry_run:
        if shutil.which("sbatch") is None:
            raise UserError(
                "`sbatch` is not installed, so jobs cannot be sent to Slurm; run on a Slurm login "
                "node, or start a local test cluster with slurm/local/up.sh"
            )
        have = cpus_per_node(partition)
        if not gpu and per_node * cpt > have:
            raise UserError(
                f"{per_node} workers per node x {cpt} CPUs each need {per_node * cpt} CPUs per "
                f"node, but the nodes{' of ' + partition if partition else ''} have {have}; "
                f"lower --tasks-per-node or --cpus-per-task"
            )
    scripts = render_submit(
        jobs,
        tasks_per_node=per_node,
        gpus_per_node=gpus_per_node if gpu else 0,
        cpus_per_task=cpt,
        partition=partition,
        extra_sbatch=tuple(sbatch_args),
        array=array,
        log_dir=str(run_dir),
        program=(sys.executable, "-m", "harness.cli.main"),
    )
    (run_dir / "sweeps").mkdir(parents=True, exist_ok=True)
    (run_dir / "sweep.yaml").write_text(Path(sweep_file).read_text())
    for job in jobs:
        Path(job.sweep_file).write_text(part_yaml(data, job))
    records = []
    groups = [jobs] if array else [[j] for j in jobs]
    for script, group in zip(scripts, groups):
        name = group[0].name if not array else re.sub(r"-n\d+$", "", group[0].name)
        (run_dir / f"{name}.sbatch.sh").write_text(script)
        job_id = "(dry run)" if dry_run else submit(script, run_dir)
        for i, j in enumerate(group):
            records.append(
                {
                    "job_id": f"{job_id}_{i}" if array and not dry_run else job_id,
                    "name": name,
                    "nodes": j.nodes,
                    "workers": list(j.workers),
                    "sweep": j.sweep_file,
                    "output": j.output,
                    "script": str(run_dir / f"{name}.sbatch.sh"),
                    "submitted_utc": _now(),
                    "state": "DRY-RUN" if dry_run else "SUBMITTED",
                }
            )
    if not dry_run:
        write_jobs(run_dir, read_jobs(run_dir) + records)
    return run_dir, records


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def read_jobs(run_dir: Path) -> list[dict]:
    f = run_dir / JOBS_FILE
    return json.loads(f.read_text()) if f.exists() else []


def write_jobs(run_dir: Path, jobs: list[dict]) -> None:
    write_json_atomic(run_dir / JOBS_FILE, jobs, indent=1)


# ----------------------------------------------------------------------------------------- status


def status(targets: tuple[str, ...]) -> list[dict]:
    """One row per job: run directories' recorded jobs (their states updated in place) and job ids."""
    rows = []
    for t in targets or _own_jobs():
        p = Path(t)
        if p.is_dir():
            jobs = read_jobs(p)
            if not jobs:
                raise UserError(f"{p} has no {JOBS_FILE}: give a run directory made by `ddlbench slurm submit`")
            for j in jobs:
                state, name = job_states(j["job_id"]).get(j["job_id"], (None, None))
                if state and name == j["name"]:  # a job id of another job (a reset test cluster) is not ours
                    j["state"], j["seen_utc"] = state, _now()
                rows.append({**j, "cells": _cells(Path(j["output"]))})
            write_jobs(p, jobs)
        elif re.fullmatch(r"\d+(_\d+)?", t):
            states = job_states(t)
            for jid, (state, _) in (
                states.items() if states else [(t, ("UNKNOWN (finished long ago, or no such job)", ""))]
            ):
                if t in (jid, jid.split("_")[0]):
                    rows.append({"job_id": jid, "state": state})
        else:
            raise UserError(f"{t!r} is neither a job id nor a run directory")
    return rows


def _own_jobs() -> list[str]:
    res = slurm_tool("squeue", ["-h", "--me", "-o", "%i %j"])
    return [line.split()[0] for line in res.stdout.splitlines() if " ddlbench-" in f" {line.split(maxsplit=1)[-1]}"]


def _cells(run: Path) -> str:
    counts = pd.Series(list(cell_statuses(run).values()), dtype=object).value_counts().sort_index()
    return ", ".join(f"{n} {s}" for s, n in counts.items()) or "none yet"


def collect(paths: tuple[str, ...], merged: Path) -> Path:
    """Merge the cells of the submitted jobs' run directories into `merged` (harness/results/merge.py),
    with their jobs and the sweep file they came from."""
    sources = run_dirs(paths)
    merge_runs(sources, merged)
    jobs = [j for s in {s.parent for s in sources} | set(sources) for j in read_jobs(s)]
    if jobs:
        write_jobs(merged, jobs)
    top = next((s.parent / "sweep.yaml" for s in sources if (s.parent / "sweep.yaml").exists()), None)
    if top:
        shutil.copy(top, merged / "sweep.yaml")
    return merged
