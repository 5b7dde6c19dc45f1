"""`ddlbench slurm`: submit a sweep to Slurm, follow its jobs, merge their results.

    ddlbench slurm submit sweep.yaml --nodes 4 --gpus-per-node 4 --partition gpu --output runs/r1
    ddlbench slurm status runs/r1            # or job ids; states from scontrol (no accounting needed)
    ddlbench slurm collect runs/r1 -o runs/r1-all

A sweep is split by the number of nodes its cells need (workers / workers per node: one per GPU, or
one per node on CPU unless --tasks-per-node says more). Each node count becomes one job (or one
element of a job array with --array) that runs `ddlbench sweep` on its part of the sweep inside the
allocation, writing RUN_DIR/<run>-n<nodes>/; `collect` merges those parts into one run directory.
"""

from __future__ import annotations

import datetime
import json
import re
import shutil
import sys
from pathlib import Path

import click
import yaml

from harness.atomic import write_json_atomic, write_parquet_atomic
from harness.errors import UserError
from harness.launch.slurm_client import cpus_per_node, job_states, slurm_tool, submit

JOBS_FILE = "slurm-jobs.json"
"""Submitted jobs of a run directory, and the last state seen for each."""


# ----------------------------------------------------------------------------------------- submit

def submit_sweep(sweep_file: str | Path, *, nodes: int, gpus_per_node: int = 0, tasks_per_node: int | None = None,
                 cpus_per_task: int | None = None, partition: str | None = None, time: str | None = None,
                 output: Path | None = None, array: bool = False, sbatch_args: tuple[str, ...] = (),
                 dry_run: bool = False) -> tuple[Path, list[dict]]:
    """Check, write the parts and job scripts under the run directory, submit. Returns (run dir, jobs)."""
    from harness.launch.sweep_jobs import parse_time_min, part_yaml, plan_jobs, render_submit
    from harness.results.store import new_run_id
    from harness.sweep import load_sweep

    cfg = load_sweep(sweep_file)
    data = yaml.safe_load(Path(sweep_file).read_text()) or {}
    if nodes < 1:
        raise UserError(f"--nodes must be at least 1, got {nodes}")
    gpu = gpus_per_node > 0 and cfg.device != "cpu"
    if cfg.device == "cuda" and not gpu:
        raise UserError("the sweep runs on cuda but --gpus-per-node is 0; say how many GPUs each node has")
    per_node = tasks_per_node or (gpus_per_node if gpu else 1)
    if gpu and per_node > gpus_per_node:
        raise UserError(f"{per_node} workers per node but --gpus-per-node {gpus_per_node}: one worker runs per "
                        f"GPU; lower --tasks-per-node or raise --gpus-per-node")
    cpt = cpus_per_task or cfg.threads
    limit = parse_time_min(time) if time else None
    run_dir = (output or Path("results") / new_run_id(cfg.name)).resolve()
    jobs = plan_jobs(data, run_dir, nodes, per_node, limit)
    if not dry_run:
        if shutil.which("sbatch") is None:
            raise UserError("`sbatch` is not installed, so jobs cannot be sent to Slurm; run on a Slurm login "
                            "node, or start a local test cluster with slurm/local/up.sh")
        have = cpus_per_node(partition)
        if not gpu and per_node * cpt > have:
            raise UserError(f"{per_node} workers per node x {cpt} CPUs each need {per_node * cpt} CPUs per "
                            f"node, but the nodes{' of ' + partition if partition else ''} have {have}; "
                            f"lower --tasks-per-node or --cpus-per-task")
    scripts = render_submit(jobs, tasks_per_node=per_node, gpus_per_node=gpus_per_node if gpu else 0,
                            cpus_per_task=cpt, partition=partition, extra_sbatch=tuple(sbatch_args),
                            array=array, log_dir=str(run_dir), program=(sys.executable, "-m", "harness.cli"))
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
            records.append({"job_id": f"{job_id}_{i}" if array and not dry_run else job_id, "name": name,
                            "nodes": j.nodes, "workers": list(j.workers), "sweep": j.sweep_file,
                            "output": j.output, "script": str(run_dir / f"{name}.sbatch.sh"),
                            "submitted_utc": _now(), "state": "DRY-RUN" if dry_run else "SUBMITTED"})
    if not dry_run:
        _write_jobs(run_dir, _read_jobs(run_dir) + records)
    return run_dir, records


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def _read_jobs(run_dir: Path) -> list[dict]:
    f = run_dir / JOBS_FILE
    return json.loads(f.read_text()) if f.exists() else []


def _write_jobs(run_dir: Path, jobs: list[dict]) -> None:
    write_json_atomic(run_dir / JOBS_FILE, jobs, indent=1)


# ----------------------------------------------------------------------------------------- status

def status(targets: tuple[str, ...]) -> list[dict]:
    """One row per job: run directories' recorded jobs (their states updated in place) and job ids."""
    rows = []
    for t in targets or _own_jobs():
        p = Path(t)
        if p.is_dir():
            jobs = _read_jobs(p)
            if not jobs:
                raise UserError(f"{p} has no {JOBS_FILE}: give a run directory made by `ddlbench slurm submit`")
            for j in jobs:
                state, name = job_states(j["job_id"]).get(j["job_id"], (None, None))
                if state and name == j["name"]:  # a job id of another job (a reset test cluster) is not ours
                    j["state"], j["seen_utc"] = state, _now()
                rows.append({**j, "cells": _cells(Path(j["output"]))})
            _write_jobs(p, jobs)
        elif re.fullmatch(r"\d+(_\d+)?", t):
            states = job_states(t)
            for jid, (state, _) in (states.items() if states else
                                    [(t, ("UNKNOWN (finished long ago, or no such job)", ""))]):
                if t in (jid, jid.split("_")[0]):
                    rows.append({"job_id": jid, "state": state})
        else:
            raise UserError(f"{t!r} is neither a job id nor a run directory")
    return rows


def _own_jobs() -> list[str]:
    res = slurm_tool("squeue", ["-h", "--me", "-o", "%i %j"])
    return [line.split()[0] for line in res.stdout.splitlines() if " ddlbench-" in f" {line.split(maxsplit=1)[-1]}"]


def _cells(run: Path) -> str:
    import pandas as pd

    parts = sorted(run.glob("cells/*/summary.parquet"))
    if not parts:
        return "none yet"
    status = pd.concat([pd.read_parquet(p, columns=["status"]) for p in parts])["status"]
    return ", ".join(f"{n} {s}" for s, n in status.value_counts().sort_index().items())


# ---------------------------------------------------------------------------------------- collect

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
            raise UserError(f"no run directory at {p} (a run directory holds cells/); give run directories "
                            f"or the RUN_DIR of `ddlbench slurm submit`")
        out.extend(found)
    return out


def collect(paths: tuple[str, ...], merged: Path) -> Path:
    """Merge the finished cells of several run directories into `merged` and consolidate its tables.
    A cell present twice keeps its ok measurement over a failed one, else the later directory's."""
    import pandas as pd

    from harness.results import store

    sources = run_dirs(paths)
    merged = merged.resolve()
    if any(s.resolve() == merged for s in sources):
        raise UserError(f"{merged} is one of the inputs; give collect a new directory with -o")
    if (merged / "cells").exists() and not (merged / "collected.json").exists():
        raise UserError(f"{merged} already holds a run not made by collect; give another directory with -o")
    chosen: dict[str, tuple[Path, str]] = {}
    for src in sources:
        for part in sorted((src / "cells").glob("*/summary.parquet")):
            state = str(pd.read_parquet(part, columns=["status"])["status"].iloc[0])
            old = chosen.get(part.parent.name)
            if old is None or state == "ok" or old[1] != "ok":
                chosen[part.parent.name] = (part.parent, state)
    if not chosen:
        raise UserError(f"no finished cells in {', '.join(map(str, sources))}; wait for the jobs "
                        f"(`ddlbench slurm status`) or resume them")
    if (merged / "cells").exists():
        shutil.rmtree(merged / "cells")
    for cell_id, (src, _) in chosen.items():
        shutil.copytree(src, store.cell_dir(merged, cell_id))
    for table in ("environment", "commbench"):
        frames = [pd.read_parquet(s / f"{table}.parquet") for s in sources if (s / f"{table}.parquet").exists()]
        if frames:
            write_parquet_atomic(pd.concat(frames, ignore_index=True).drop_duplicates(), merged / f"{table}.parquet")
    jobs = [j for s in {s.parent for s in sources} | set(sources) for j in _read_jobs(s)]
    if jobs:
        _write_jobs(merged, jobs)
    top = next((s.parent / "sweep.yaml" for s in sources if (s.parent / "sweep.yaml").exists()), None)
    if top:
        shutil.copy(top, merged / "sweep.yaml")
    store.consolidate(merged)
    (merged / "collected.json").write_text(json.dumps(
        {"collected_utc": _now(), "sources": [str(s.resolve()) for s in sources],
         "cells": {c: str(src) for c, (src, _) in sorted(chosen.items())}}, indent=1))
    return merged


# -------------------------------------------------------------------------------------------- CLI

@click.group("slurm")
def command():
    """Submit sweeps to Slurm, follow the jobs, merge their results."""


@command.command("submit")
@click.argument("sweep_file", type=click.Path(dir_okay=False))
@click.option("--nodes", type=int, required=True, help="Most nodes any job may use.")
@click.option("--gpus-per-node", type=int, default=0, show_default=True,
              help="GPUs per node (one worker each); 0 runs on CPU.")
@click.option("--tasks-per-node", type=int, help="Workers per node (default: one per GPU; on CPU 1).")
@click.option("--cpus-per-task", type=int, help="CPUs per worker (default: the sweep's threads).")
@click.option("--partition", help="Slurm partition (default: the cluster's).")
@click.option("--time", "time_", help="Time limit per job, Slurm format (default: sum of its cells' timeouts).")
@click.option("--output", type=click.Path(file_okay=False, path_type=Path),
              help="Run directory (default results/<run-id>); each job writes a part below it.")
@click.option("--array", is_flag=True, help="One job array (one element per node count) instead of one job each.")
@click.option("--sbatch-arg", "sbatch_args", multiple=True, help="Extra sbatch option, e.g. --exclusive (repeatable).")
@click.option("--dry-run", is_flag=True, help="Write the job scripts but do not submit them.")
def submit_command(sweep_file, nodes, gpus_per_node, tasks_per_node, cpus_per_task, partition, time_, output,
                   array, sbatch_args, dry_run):
    """Submit SWEEP_FILE: one job per node count its cells need; print the job ids."""
    run_dir, jobs = submit_sweep(sweep_file, nodes=nodes, gpus_per_node=gpus_per_node,
                                 tasks_per_node=tasks_per_node, cpus_per_task=cpus_per_task, partition=partition,
                                 time=time_, output=output, array=array, sbatch_args=sbatch_args, dry_run=dry_run)
    for j in jobs:
        click.echo(f"{j['job_id']}\t{j['nodes']} node(s)\tworkers {','.join(map(str, j['workers']))}\t{j['output']}")
    click.echo(f"run directory: {run_dir}  (follow: ddlbench slurm status {run_dir})")


@command.command("status")
@click.argument("targets", nargs=-1)
def status_command(targets):
    """State of jobs (ids, or run directories from submit; default: your ddlbench jobs)."""
    rows = status(targets)
    if not rows:
        click.echo("no ddlbench jobs in the queue")
    for r in rows:
        where = f"\t{r['output']}\tcells: {r['cells']}" if "output" in r else ""
        click.echo(f"{r['job_id']}\t{r['state']}{where}")


@command.command("collect")
@click.argument("runs", nargs=-1, required=True)
@click.option("-o", "--output", type=click.Path(file_okay=False, path_type=Path), required=True,
              help="Merged run directory to write.")
def collect_command(runs, output):
    """Merge the cells of several run directories (e.g. one per job) into one run directory."""
    from harness.commands.show import print_summary
    from harness.results.store import load_run

    merged = collect(runs, output)
    print_summary(load_run(merged).summary, title=str(merged))
    click.echo(f"results: {merged}")
