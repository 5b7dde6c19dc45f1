"""A planned srun step read back into its tasks, for warm ranks in an allocation (docs/ARCHITECTURE.md,
"Warm ranks"; launchers/srun/warm.py forks them). Pure: no process, no Slurm.

    tasks = warm_tasks(steps)        # None when a step is not plain tasks of the worker (horovodrun)
    env = task_env(tasks[0], alloc)  # what srun would set for that task, plus the step's variables

A task's command is run as itself (`python -P -m harness.rank.worker ...`) or, behind the shim, as the shim
run inside the rank (`srun_task STYLE --here -- -m harness.rank.worker ...`), so that a style reads the
variables of the node the rank runs on, as it does in a cold task.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from harness.contracts.recipes.srun import SHIM_MODULE, Allocation, Step
from harness.procs.argv import WORKER_MODULE
from harness.procs.env import RANK_START_VAR

_FLAGS = {"--overcommit", "--overlap", "--exclusive", "--label", "-l"}
"""srun options without a value that a warm cell may carry (they shape CPUs, not what a task sees)."""


@dataclass(frozen=True)
class Task:
    """One task of a planned step, as a warm spawn."""

    rank: int
    """Its task number in the step (SLURM_PROCID)."""
    host: str
    step: Step
    module: str
    args: tuple
    log: str
    """Its log file (the step's --output with %t and %N filled in)."""


def _options(argv: tuple) -> tuple[dict, list[str]] | None:
    """(srun's options as {name: value}, the task command) of an `srun ... COMMAND` argv, or None when it
    is not a plain srun step (a framework launcher) or carries an option this module cannot honour."""
    if not argv or os.path.basename(argv[0]) != "srun":
        return None
    opts: dict[str, str] = {}
    for i, word in enumerate(argv[1:], 1):
        if not word.startswith("-"):
            return opts, list(argv[i:])
        name, eq, value = word.partition("=")
        if not eq and word not in _FLAGS:
            return None
        opts[name] = value
    return None


def _module_of(command: list[str]) -> tuple[str, tuple] | None:
    """(module, argv) a task command runs: `PYTHON [-P] -m harness.rank.worker ...` as itself,
    `PYTHON [-P] -m harness.rank.srun_task STYLE -- PYTHON [-P] -m harness.rank.worker ...` as the shim run
    here (`--here`); None for anything else."""

    def python_m(words: list[str]) -> tuple[str, list[str]] | None:
        if not words or not os.path.basename(words[0]).startswith("python"):
            return None
        words = words[1:]
        words = words[1:] if words[:1] == ["-P"] else words
        return (words[1], words[2:]) if len(words) >= 2 and words[0] == "-m" else None

    outer = python_m(command)
    if outer is None:
        return None
    module, rest = outer
    if module == WORKER_MODULE:
        return module, tuple(rest)
    if module == SHIM_MODULE and len(rest) >= 2 and rest[1] == "--":
        inner = python_m(rest[2:])
        if inner and inner[0] == WORKER_MODULE:
            return SHIM_MODULE, (rest[0], "--here", "--", "-m", inner[0], *inner[1])
    return None


def warm_tasks(steps: list[Step]) -> list[Task] | None:
    """Every task of `steps` as a warm spawn, or None when one of the steps cannot run warm (pure)."""
    tasks = []
    for step in steps:
        parsed = _options(step.argv)
        if parsed is None or not step.hosts:
            return None
        opts, command = parsed
        what = _module_of(command)
        out = opts.get("--output", "")
        if what is None or not out or "%" in out.replace("%t", "").replace("%N", ""):
            return None
        for r, host in enumerate(step.hosts):
            tasks.append(Task(r, host, step, what[0], what[1], out.replace("%t", str(r)).replace("%N", host)))
    return tasks


def _per_node(hosts: tuple[str, ...], order: tuple[str, ...]) -> list[tuple[str, int]]:
    """(node, tasks on it) in the allocation's node order."""
    rank_of = {n: i for i, n in enumerate(order)}
    nodes = sorted(dict.fromkeys(hosts), key=lambda n: rank_of.get(n, len(order)))
    return [(n, hosts.count(n)) for n in nodes]


def task_env(task: Task, alloc: Allocation) -> dict[str, str]:
    """What srun sets for this task of its step (`man srun`, OUTPUT ENVIRONMENT VARIABLES) and the step's own
    variables (pure); the rest of the task's environment is what Slurm gave its node's zygote."""
    step, hosts = task.step, task.step.hosts
    counts = _per_node(hosts, alloc.nodes)
    nodes = [n for n, _ in counts]
    opts = _options(step.argv)[0]
    local = hosts[: task.rank].count(task.host)
    env = {
        "SLURM_PROCID": str(task.rank),
        "SLURM_LOCALID": str(local),
        "SLURM_NODEID": str(nodes.index(task.host)),
        "SLURM_NTASKS": str(len(hosts)),
        "SLURM_NPROCS": str(len(hosts)),
        "SLURM_NNODES": str(len(nodes)),
        "SLURM_STEP_NUM_TASKS": str(len(hosts)),
        "SLURM_STEP_NUM_NODES": str(len(nodes)),
        "SLURM_STEP_NODELIST": ",".join(nodes),
        "SLURM_NODELIST": ",".join(nodes),
        "SLURM_STEP_TASKS_PER_NODE": ",".join(str(c) for _, c in counts),
        "SLURM_TASKS_PER_NODE": ",".join(str(c) for _, c in counts),
        "SLURM_GTIDS": ",".join(str(i) for i, h in enumerate(hosts) if h == task.host),
        "SLURM_DISTRIBUTION": "arbitrary",
        RANK_START_VAR: "warm",
    }
    if "--cpus-per-task" in opts:
        env["SLURM_CPUS_PER_TASK"] = opts["--cpus-per-task"]
    if "--job-name" in opts:
        env["SLURM_JOB_NAME"] = opts["--job-name"]
    env.update(dict(step.env))
    return env
