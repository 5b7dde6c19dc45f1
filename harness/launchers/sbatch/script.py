"""Slurm batch scripts for a benchmark run (pure: the text is compared with
tests/data/sbatch_reference_<style>.sh). Submitting and following jobs: harness/jobs/ (client.py), whose
scripts come from here through harness/launchers/choose.batch_script.

    from harness.contracts.recipes.sbatch import SbatchSpec
    from harness.launchers.sbatch.script import render_sbatch
    text = render_sbatch(SbatchSpec(job_name="ddl", nodes=2, tasks_per_node=4,
                                    command=("ddlbench", "run", "--scheme", "wfbp-a2a")))

The lines every script shares (directives, rendezvous, port) are written here, after the spec is checked
(`check`: one-line UserErrors). How the script starts the workers is the launch style's (`SbatchSpec.launch`),
and every style belongs to a backend (its `SbatchRecipe`, harness/contracts/recipes/sbatch.py, which also says
what the `sweep` style does; `launch_styles` asks the backends' registry for them).
"""

from __future__ import annotations

import re
import shlex

from harness.contracts.backend import every
from harness.contracts.recipes.sbatch import SWEEP_STYLE, SbatchRecipe, SbatchSpec, SbatchStyle
from harness.contracts.rendezvous import PORT_BASE, PORT_SPAN
from harness.core.errors import UserError
from harness.procs.argv import argv_words


def launch_styles() -> dict[str, SbatchStyle]:
    """Styles in which the script's tasks are the workers, each owned by a backend (name -> style)."""
    return {name: style for _, r in every(SbatchRecipe) for name, style in r.styles.items()}


def total_nodes(s: SbatchSpec) -> int:
    """Nodes to allocate: worker nodes, plus what the launch style needs beyond them (dedicated
    parameter-server nodes)."""
    style = launch_styles().get(s.launch)
    return s.nodes + (style.extra_nodes(s) if style else 0)


# ---------------------------------------------------------------------------------------- the check


def check(s: SbatchSpec) -> None:
    """UserError, one line, for a spec no script can be written from (before any text is)."""
    _check_job(s)
    _check_counts(s)
    _check_text(s)


def _check_job(s: SbatchSpec) -> None:
    """The launch style, command and job name."""
    if s.launch not in (*launch_styles(), SWEEP_STYLE):
        raise UserError(
            f"unknown launch style {s.launch!r}; available: {', '.join(launch_styles())}, "
            f"or {SWEEP_STYLE!r} for a script that runs a ddlbench sweep"
        )
    if not s.command:
        raise UserError("the sbatch spec has an empty command; give the argv each worker runs")
    if not re.fullmatch(r"[A-Za-z0-9_.+-]+", s.job_name):
        raise UserError(f"job name {s.job_name!r} is not usable by Slurm; use letters, digits and _.+-")


def _check_counts(s: SbatchSpec) -> None:
    """The node, task, CPU, GPU and server counts, the time limit and the Horovod controller."""
    for name, value in (
        ("nodes", s.nodes),
        ("tasks_per_node", s.tasks_per_node),
        ("cpus_per_task", s.cpus_per_task),
        ("time_limit_min", s.time_limit_min),
        ("ps_servers", s.ps_servers),
    ):
        if value < 1:
            raise UserError(f"{name}={value} in the sbatch spec; it must be at least 1")
    if s.gpus_per_node < 0 or s.ps_server_nodes < 0:
        raise UserError("gpus_per_node and ps_server_nodes must not be negative")
    if s.horovod_controller not in ("gloo", "mpi"):
        raise UserError(f"horovod_controller {s.horovod_controller!r} unknown; use 'gloo' or 'mpi'")


def _check_text(s: SbatchSpec) -> None:
    """What goes into the script as text: extra options, variable names, notes, variables, paths."""
    for opt in s.extra_sbatch:
        if not opt.startswith("-") or "\n" in opt:
            raise UserError(f"extra sbatch option {opt!r} must be one option such as '--exclusive'")
    for key in [*s.env, *(v[0] for v in s.variables)]:
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
            raise UserError(f"environment variable name {key!r} is not valid in a shell")
    if any("\n" in line for line in s.notes):
        raise UserError("notes are one comment line each; split them at the newlines")
    for var in s.variables:
        if len(var) != 3 or any("\n" in str(part) for part in var):
            raise UserError(f"variable {var!r} must be (name, value, comment) without newlines")
    if any(ch in str(v) for v in (s.output, s.partition or "", s.array or "") for ch in "\n #"):
        raise UserError("output, partition and array must not contain spaces, '#' or newlines")


# ---------------------------------------------------------------------------------------- rendering


def _directives(s: SbatchSpec) -> list[tuple[str, str]]:
    """(#SBATCH option, comment saying why) pairs, in the order they are written."""
    lines = [
        (f"--job-name={s.job_name}", "name in squeue; %x in --output"),
        (f"--nodes={total_nodes(s)}", _nodes_comment(s)),
        (f"--ntasks-per-node={s.tasks_per_node}", "workers per node (one per GPU, or per core on CPU)"),
        (f"--cpus-per-task={s.cpus_per_task}", "cores per worker (data loading, communication threads)"),
    ]
    if s.gpus_per_node:
        lines.append((f"--gpus-per-node={s.gpus_per_node}", "GPUs per node"))
    if s.partition:
        lines.append((f"--partition={s.partition}", "partition (queue) to run in"))
    lines.append((f"--time={s.time_limit_min}", "wall-clock limit in minutes; then Slurm ends the job (TIMEOUT)"))
    lines.append((f"--output={s.output}", "stdout and stderr; %x job name, %j job id, %a array index"))
    if s.array:
        lines.append((f"--array={s.array}", "job array: one job per index; a %-suffix caps how many run at once"))
    lines += [(opt, "extra option from SbatchSpec.extra_sbatch") for opt in s.extra_sbatch]
    return lines


def _nodes_comment(s: SbatchSpec) -> str:
    if total_nodes(s) != s.nodes:
        return f"{s.nodes} worker node(s) + {s.ps_server_nodes} parameter-server node(s)"
    return "nodes in the allocation"


def _port_line(s: SbatchSpec) -> str:
    if s.master_port is not None:
        return f"export MASTER_PORT={s.master_port}"
    return (
        f"export MASTER_PORT=${{MASTER_PORT:-$(({PORT_BASE} + SLURM_JOB_ID % {PORT_SPAN}))}}"
        "  # = harness.contracts.rendezvous.port_for_job"
    )


_RENDEZVOUS = """\
# Rendezvous on the first node of the allocation, at the address Slurm uses for it (NodeAddr):
# node names need not resolve. Exported, so every task agrees without asking the controller.
mapfile -t HOSTS < <(scontrol show hostnames "$SLURM_JOB_NODELIST")
MASTER_ADDR=$(scontrol show node "${HOSTS[0]}" | grep -o 'NodeAddr=[^ ]*' | cut -d= -f2 || true)
export MASTER_ADDR=${MASTER_ADDR:-${HOSTS[0]}}
"""


def render_sbatch(spec: SbatchSpec) -> str:
    """The complete batch script for `spec` (pure: same spec, same text); UserError for a spec that `check`
    refuses."""
    check(spec)
    directives = _directives(spec)
    width = max(len(opt) for opt, _ in directives)
    if spec.launch == SWEEP_STYLE:
        what = f"a ddlbench sweep on up to {spec.nodes} nodes x {spec.tasks_per_node} workers, one job step per cell"
    else:
        what = f"{spec.workers} workers ({spec.nodes} nodes x {spec.tasks_per_node}), launched with {spec.launch}"
    lines = [
        "#!/bin/bash",
        f"# {spec.job_name}: {what}. Written by harness/launchers/sbatch/script.py.",
        *(f"# {line}".rstrip() for line in spec.notes),
        *(f"#SBATCH {opt.ljust(width)}  # {why}" for opt, why in directives),
        "",
        "set -euo pipefail",
        *(f"export {k}={shlex.quote(str(v))}" for k, v in sorted(spec.env.items())),
        *_variables(spec),
    ]
    if spec.launch == SWEEP_STYLE:
        return "\n".join(lines) + "\n" + _launch_sweep(spec)
    return (
        "\n".join(lines)
        + "\n"
        + _RENDEZVOUS
        + _port_line(spec)
        + "\n"
        + (
            'echo "job $SLURM_JOB_ID: ${#HOSTS[@]} nodes (${HOSTS[*]}), rendezvous $MASTER_ADDR:$MASTER_PORT"\n'
            "\n" + launch_styles()[spec.launch].render(spec)
        )
    )


def _variables(spec: SbatchSpec) -> list[str]:
    if not spec.variables:
        return []
    width = max(len(f"{name}={value}") for name, value, _ in spec.variables)
    return [""] + [
        (f"{name}={value}".ljust(width) + f"  # {why}") if why else f"{name}={value}"
        for name, value, why in spec.variables
    ]


def _launch_sweep(spec: SbatchSpec) -> str:
    return (
        "\n"
        "# The sweep runs here, on the first node. Each cell becomes one job step over the nodes it needs\n"
        "# (harness/launchers/srun/launcher.py): a failed or hung cell is recorded and the sweep goes on; cells\n"
        "# already on disk are skipped when the job is submitted again (--resume).\n"
        'echo "job ${SLURM_JOB_ID}: nodes ${SLURM_JOB_NODELIST}"\n'
        f"{argv_words(spec.command)}\n"
    )
