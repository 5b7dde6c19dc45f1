"""The recipe a backend gives batch scripts (docs/ARCHITECTURE.md, "Launcher" and "Slurm"): its launch styles,
each rendering the block that starts the workers from an `SbatchSpec` (the command's shell words and a step's CPU
option: harness/procs/argv.py, `argv_words`, `step_cpus`), its example scripts and the sweep files they run.
Types only: the script around a launch block, and the check of a spec, are harness/launchers/sbatch/script.py's
(`render_sbatch`: directives, rendezvous, port), and harness/jobs/ submits it. Pure: no process, no Slurm.

Every launch style belongs to a backend (e.g. `srun` to torch, `horovodrun` to horovod), which starts the
workers the way that framework's users do (docs/ARCHITECTURE.md, "Launching"). One style starts no workers
itself:

- sweep:      the script runs `command` (a `ddlbench sweep`) once, on the first node; the harness then
              runs each cell as a job step over the nodes it needs (harness.launchers.srun.launcher), starting
              each backend its own way, so a failed cell is recorded and the sweep goes on.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

from harness.contracts.backend import recipe_type

REFERENCE_COMMAND = ("ddlbench", "run", "--workload", "resnet50", "--method", "wfbp-a2a", "--note", "two words")
"""What the styles' reference scripts run (a backend adds its `--backend`): a word with a space in it, quoted."""


@dataclass(frozen=True)
class SbatchStyle:
    """One way a batch script starts the workers (`SbatchSpec.launch`)."""

    render: Callable[[Any], str]
    """(SbatchSpec) -> the script's launch block, after the rendezvous lines."""
    extra_nodes: Callable[[Any], int] = lambda spec: 0
    """(SbatchSpec) -> nodes the job needs beyond the worker nodes (e.g. dedicated server nodes)."""
    reference: dict = field(default_factory=dict)
    """SbatchSpec fields of this style's reference script, exercising the options it renders: its text is
    tests/data/sbatch_reference_<style>.sh, written by `python tests/unit/launchers/test_sbatch_render.py
    --regenerate` and compared with the rendered one by that test."""


@recipe_type
@dataclass(frozen=True)
class SbatchRecipe:
    """Batch scripts (rendered by harness/launchers/sbatch/script.py, submitted by harness/jobs/sweep_jobs.py)."""

    launcher: ClassVar[str] = "sbatch"
    styles: dict = field(default_factory=dict)
    """Launch styles this backend renders: style -> SbatchStyle."""
    examples: tuple = ()
    """Example scripts (slurm/*.sbatch): dicts of name, sweep (a slurm/sweeps/<name>.yaml), notes and SbatchSpec
    fields."""
    sweeps: dict = field(default_factory=dict)
    """The sweep files its examples run: name -> {"notes": comment lines, "sweep": the file's keys}, written as
    slurm/sweeps/<name>.yaml (harness/jobs/sweep_jobs.example_sweeps) by `python
    tests/integration/slurm/test_slurm_sweep.py --regenerate`, which also writes the example scripts."""


# ------------------------------------------------------------------------------------ the spec


SWEEP_STYLE = "sweep"
"""Style in which the script runs a ddlbench sweep once and the harness launches each cell."""


@dataclass(frozen=True)
class SbatchSpec:
    """One batch script: its #SBATCH directives, variables, and how it starts the workers (`launch`)."""

    job_name: str
    """Name shown by squeue; `%x` in the output pattern."""
    command: tuple[str, ...]
    """argv each worker runs (a list is accepted and stored as a tuple)."""
    nodes: int = 1
    """Nodes running workers (a style with dedicated server nodes adds `ps_server_nodes`)."""
    tasks_per_node: int = 1
    """Workers per node: one per GPU, or one per core on CPU."""
    gpus_per_node: int = 0
    """GPUs requested per node; 0 asks for none (the line is left out)."""
    cpus_per_task: int = 1
    """CPU cores per worker (data loading, gloo threads)."""
    partition: str | None = None
    """Slurm partition; None uses the cluster's default partition."""
    time_limit_min: int = 60
    """Wall-clock limit in minutes; Slurm ends the job after it (state TIMEOUT)."""
    output: str = "slurm-%x-%j.out"
    """stdout+stderr path pattern: %x job name, %j job id, %A/%a array job id/index, %N node."""
    array: str | None = None
    """Job array indices ("0-7", "0-15%4" = at most 4 at once); each index is one job."""
    extra_sbatch: tuple[str, ...] = ()
    """More sbatch options, one per item, e.g. "--exclusive" or "--constraint=ib"."""
    env: dict[str, str] = field(default_factory=dict)
    """Variables exported before launching (NCCL_SOCKET_IFNAME, GLOO_SOCKET_IFNAME, ...)."""
    launch: str = "srun"
    """How workers start: a style of a backend's `SbatchRecipe.styles`, or SWEEP_STYLE (see the module docstring);
    checked by harness/launchers/sbatch/script.py."""
    notes: tuple[str, ...] = ()
    """Comment lines under the script's first line: what it is for, what to edit, how to submit it."""
    variables: tuple[tuple[str, str, str], ...] = ()
    """Shell variables set before the launch, as (name, value, comment); the value is written as is
    (shell syntax, e.g. '${DDLBENCH_SWEEP:-sweep.yaml}'), and command words may use them as ${NAME}."""
    master_port: int | None = None
    """Rendezvous port; None derives it from the job id like harness.contracts.rendezvous.port_for_job."""
    horovod_controller: str = "gloo"
    """Styles whose launcher starts remote ranks itself: "gloo" (over ssh) or "mpi" (mpirun)."""
    ps_servers: int = 1
    """Styles with parameter servers: number of server processes."""
    ps_server_nodes: int = 0
    """Styles with parameter servers: extra nodes holding only servers; 0 places them on worker nodes."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "command", tuple(str(a) for a in self.command))
        object.__setattr__(self, "extra_sbatch", tuple(self.extra_sbatch))
        object.__setattr__(self, "variables", tuple(tuple(v) for v in self.variables))
        object.__setattr__(self, "notes", tuple(self.notes))

    @property
    def workers(self) -> int:
        """Worker processes in the job."""
        return self.nodes * self.tasks_per_node
