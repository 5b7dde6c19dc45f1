"""What job scripts a sweep becomes under Slurm (pure functions; `ddlbench slurm submit` does the I/O).

    jobs = plan_jobs(yaml.safe_load(open("sweep.yaml")), Path("/runs/r1"), nodes=4, per_node=4)
    print(render_submit(jobs, tasks_per_node=4, gpus_per_node=4)[0])

A sweep is split by the number of nodes its cells need: ceil(workers / workers per node). Each node
count becomes one job whose script runs `ddlbench sweep` on that part (a sweep file of its own) inside
the allocation; the 1-worker baseline goes with the smallest part. `render_submit` is tested against
tests/data/sbatch_reference_submit*.sh, `example_scripts` against the committed slurm/*.sbatch, `example_sweeps`
against the sweep files the backends' examples run (slurm/sweeps/).
"""

from __future__ import annotations

import dataclasses
import math
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

import yaml

from harness import backends
from harness.contracts.backend import every
from harness.contracts.recipes.sbatch import SWEEP_STYLE, SbatchRecipe, SbatchSpec
from harness.core.errors import UserError
from harness.experiment.sweep import expand, sweep_from_dict
from harness.launchers.choose import batch_script
from harness.schemes import SCHEMES

STARTUP_S = 300
"""Added to a job's default time limit: Python start-up and the sweep's own bookkeeping."""


@dataclass(frozen=True)
class SweepJob:
    name: str
    """Slurm job name."""
    nodes: int
    """Nodes this job's cells need (its allocation size, unless it is part of an array)."""
    workers: tuple[int, ...]
    """The sweep's worker counts this job runs."""
    baseline: bool
    """Whether this job also measures the 1-worker baseline (only one job does)."""
    sweep_file: str
    """Sweep file of this job's part (written under RUN_DIR/sweeps/)."""
    output: str
    """Run directory of this job's part."""
    time_min: int
    """Time limit, minutes."""


def parse_time_min(text: str) -> int:
    """Slurm's --time formats (MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS) as whole minutes."""
    m = re.fullmatch(r"(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?", text.strip())
    if not m:
        raise UserError(f"--time {text!r} is not a Slurm time (MM, HH:MM:SS or D-HH:MM); e.g. --time 90")
    days, a, b, c = m.groups()
    if days is not None:  # D-HH[:MM[:SS]]
        seconds = int(days) * 86400 + int(a) * 3600 + int(b or 0) * 60 + int(c or 0)
    elif c is not None:  # HH:MM:SS
        seconds = int(a) * 3600 + int(b) * 60 + int(c)
    elif b is not None:  # MM:SS
        seconds = int(a) * 60 + int(b)
    else:  # MM
        seconds = int(a) * 60
    if seconds <= 0:
        raise UserError(f"--time {text!r} is zero; give the job's wall-clock limit, e.g. --time 90")
    return math.ceil(seconds / 60)


def plan_jobs(data: dict, run_dir: Path, nodes: int, per_node: int, time_min: int | None = None) -> list[SweepJob]:
    """Split a sweep (its YAML mapping) into one job per node count (pure but for validating the parts
    against the registries). Raises UserError when a worker count needs more than `nodes` nodes."""
    cfg = sweep_from_dict(data)
    # dedicated server hosts: one node beyond the workers' (docs/ARCHITECTURE.md, "Server placement")
    spare = int("dedicated" in cfg.server_hosts and any(SCHEMES.get(s).parameter_server for s in cfg.schemes))
    groups: dict[int, list[int]] = {}
    for w in cfg.workers:
        if not isinstance(w, int) or w < 1:
            raise UserError(f"workers must be integers >= 1, got {w!r}; fix `workers:` in the sweep file")
        need = math.ceil(w / per_node) + spare
        if need > nodes:
            raise UserError(
                f"the sweep's {w} workers need {need} nodes at {per_node} per node"
                f"{' and one for the dedicated servers' if spare else ''}, more than "
                f"--nodes {nodes}; raise --nodes or drop {w} from `workers:`"
            )
        groups.setdefault(need, []).append(w)
    name = re.sub(r"[^A-Za-z0-9_.+-]", "-", cfg.name) or "sweep"
    jobs = []
    for i, n in enumerate(sorted(groups)):
        part = {**data, "name": f"{cfg.name}-n{n}", "workers": groups[n], "baseline": cfg.baseline and i == 0}
        # Validate names and values here, on the login node, not after the job waited in the queue;
        # on CPU, since the login node may have no GPU.
        cells = expand(dataclasses.replace(sweep_from_dict(part), device="cpu"))
        limit = time_min or math.ceil((sum(c.timeout_s for c in cells) + STARTUP_S) / 60)
        jobs.append(
            SweepJob(
                name=f"ddlbench-{name}-n{n}",
                nodes=n,
                workers=tuple(groups[n]),
                baseline=part["baseline"],
                sweep_file=str(run_dir / "sweeps" / f"{name}-n{n}.yaml"),
                output=str(run_dir / f"{run_dir.name}-n{n}"),
                time_min=limit,
            )
        )
    return jobs


def part_yaml(data: dict, job: SweepJob) -> str:
    part = {**data, "name": Path(job.sweep_file).stem, "workers": list(job.workers), "baseline": job.baseline}
    return yaml.safe_dump(part, sort_keys=False)


def render_submit(
    jobs: list[SweepJob],
    *,
    tasks_per_node: int,
    gpus_per_node: int = 0,
    cpus_per_task: int = 1,
    partition: str | None = None,
    extra_sbatch: tuple[str, ...] = (),
    array: bool = False,
    log_dir: str = ".",
    program: tuple[str, ...] = ("ddlbench",),
) -> list[str]:
    """Job scripts for `jobs` (pure): one per job, or one job array over all of them. `program` is
    how the job calls ddlbench (the CLI passes this interpreter: `python -m harness.cli.main`)."""
    backends.load()  # each job's launch block is its backend's (SbatchRecipe)
    command = (
        *program,
        "sweep",
        "${SWEEP}",
        "--output",
        "${RESULTS}",
        "--resume",
        "--launcher",
        "srun",
        "--no-progress",
    )
    common = dict(
        tasks_per_node=tasks_per_node,
        gpus_per_node=gpus_per_node,
        cpus_per_task=cpus_per_task,
        partition=partition,
        extra_sbatch=tuple(extra_sbatch),
        launch=SWEEP_STYLE,
        command=command,
    )
    if not array:
        return [
            batch_script(
                SbatchSpec(
                    job_name=j.name,
                    nodes=j.nodes,
                    time_limit_min=j.time_min,
                    output=f"{log_dir}/slurm-%x-%j.out",
                    variables=(
                        (
                            "SWEEP",
                            shlex.quote(j.sweep_file),
                            f"the cells needing {j.nodes} node(s): workers "
                            f"{', '.join(map(str, j.workers))}" + (" and the 1-worker baseline" if j.baseline else ""),
                        ),
                        (
                            "RESULTS",
                            shlex.quote(j.output),
                            "tidy tables of this part (ddlbench slurm collect merges the parts)",
                        ),
                    ),
                    **common,
                )
            )
            for j in jobs
        ]
    # An array shares one resource request: every element gets the largest node count, and an element
    # whose cells need fewer nodes leaves the rest idle. The price of a single job id.
    name = re.sub(r"-n\d+$", "", jobs[0].name)
    return [
        batch_script(
            SbatchSpec(
                job_name=name,
                nodes=max(j.nodes for j in jobs),
                time_limit_min=max(j.time_min for j in jobs),
                output=f"{log_dir}/slurm-%x-%A_%a.out",
                array=f"0-{len(jobs) - 1}",
                variables=(
                    (
                        "SWEEPS",
                        "(" + " ".join(shlex.quote(j.sweep_file) for j in jobs) + ")",
                        "element i runs part i: the cells needing "
                        + ", ".join(str(j.nodes) for j in jobs)
                        + " node(s); each element holds the largest allocation",
                    ),
                    (
                        "OUTPUTS",
                        "(" + " ".join(shlex.quote(j.output) for j in jobs) + ")",
                        "where each part's tidy tables go (ddlbench slurm collect merges them)",
                    ),
                    ("SWEEP", "${SWEEPS[$SLURM_ARRAY_TASK_ID]}", ""),
                    ("RESULTS", "${OUTPUTS[$SLURM_ARRAY_TASK_ID]}", ""),
                ),
                **common,
            )
        )
    ]


def example_scripts() -> dict[str, str]:
    """slurm/<name>.sbatch: scripts users copy and edit (pure; tests check the committed files equal
    these, and `python tests/integration/slurm/test_slurm_sweep.py --regenerate` rewrites them)."""
    backends.load()  # the backends bring examples of their own (SbatchRecipe)
    command = (
        "ddlbench",
        "sweep",
        "${DDLBENCH_SWEEP}",
        "--output",
        "${DDLBENCH_RESULTS}",
        "--resume",
        "--launcher",
        "srun",
        "--no-progress",
    )
    usage = [
        "",
        "Submit from the repository (paths are relative to where sbatch runs):",
        "    sbatch slurm/{file}",
        "    DDLBENCH_SWEEP=my.yaml DDLBENCH_RESULTS=runs/mine sbatch slurm/{file}",
        "Resubmitting with the same DDLBENCH_RESULTS runs only the cells not yet on disk.",
        "Edit the #SBATCH lines for your cluster (partition, GPUs, time).",
    ]

    def spec(name: str, sweep: str, notes: list[str], **kw) -> SbatchSpec:
        variables = (
            ("DDLBENCH_SWEEP", f"${{DDLBENCH_SWEEP:-slurm/sweeps/{sweep}.yaml}}", "the sweep file to run"),
            (
                "DDLBENCH_RESULTS",
                f"${{DDLBENCH_RESULTS:-results/{name}-${{SLURM_JOB_ID}}}}",
                "run directory for the tidy tables",
            ),
        )
        kw = {"tasks_per_node": 4, "gpus_per_node": 4, "cpus_per_task": 8, "time_limit_min": 240, **kw}
        return SbatchSpec(
            job_name=f"ddlbench-{name}",
            command=command,
            launch=SWEEP_STYLE,
            output="slurm-%x-%j.out",
            variables=variables,
            notes=tuple(notes + [u.format(file=f"{name}.sbatch") for u in usage]),
            **kw,
        )

    specs = [
        spec(
            "single-node",
            "single-node",
            nodes=1,
            notes=["One node, one worker per GPU: every cell of the sweep fits on it (up to 4 workers here)."],
        ),
        spec(
            "multi-node",
            "torch",
            nodes=4,
            notes=[
                "Several nodes: each cell runs as one job step on as few nodes as its worker count allows",
                "(workers / --ntasks-per-node), rank 0 and the rendezvous on the first.",
            ],
        ),
        spec(
            "cpu",
            "cpu-tiny",
            nodes=2,
            tasks_per_node=1,
            gpus_per_node=0,
            cpus_per_task=2,
            time_limit_min=60,
            notes=["CPU nodes, one worker per node: try the harness (or the cluster) before asking for GPUs."],
        ),
    ]
    # Each backend brings its own examples (its SbatchRecipe, harness/contracts/recipes/sbatch.py).
    specs += [
        spec(
            ex["name"],
            ex["sweep"],
            list(ex["notes"]),
            **{k: v for k, v in ex.items() if k not in ("name", "sweep", "notes")},
        )
        for _, r in every(SbatchRecipe)
        for ex in r.examples
    ]
    return {f"{s.job_name.removeprefix('ddlbench-')}.sbatch": batch_script(s) for s in specs}


def example_sweeps() -> dict[str, str]:
    """slurm/sweeps/<name>.yaml that the backends' example scripts run, each declared by its backend (its
    SbatchRecipe's `sweeps`; pure: tests check the committed files equal these, and `python
    tests/integration/slurm/test_slurm_sweep.py --regenerate` rewrites them). The other files there are
    written by hand."""
    backends.load()  # the backends declare their sweeps (SbatchRecipe)
    return {
        f"{name}.yaml": "".join(f"# {line}\n" for line in decl["notes"])
        + yaml.safe_dump(decl["sweep"], sort_keys=False, default_flow_style=None, width=120)
        for _, r in every(SbatchRecipe)
        for name, decl in r.sweeps.items()
    }
