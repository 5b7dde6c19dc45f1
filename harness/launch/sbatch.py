"""Slurm batch scripts for a benchmark run, and the few calls to submit and follow them.

    from harness.launch.sbatch import SbatchSpec, render_sbatch, submit, wait_job
    text = render_sbatch(SbatchSpec(job_name="ddl", nodes=2, tasks_per_node=4,
                                    command=("ddlbench", "run", "--method", "wfbp-a2a")))
    job = submit(text, workdir="runs/ddl")      # sbatch --parsable
    print(wait_job(job, timeout_s=3600))        # COMPLETED | FAILED | CANCELLED | TIMEOUT | ...

`render_sbatch` is pure (the text is compared with tests/data/sbatch_reference_<style>.sh). Each launch
style starts the workers the way that framework's users do (DESIGN.md section 5):

- srun:       one srun task per worker; ranks from SLURM_* (harness.launch.slurm_env).
- deepspeed:  one srun task per worker with the torch variables (RANK, WORLD_SIZE, LOCAL_RANK, ...)
              that deepspeed.init_distributed reads.
- horovodrun: one launcher task on the first node runs horovodrun over all hosts of the allocation
              (`-H n1:4,n2:4`); horovodrun starts the workers (over ssh for gloo, mpirun for MPI).
- byteps:     a scheduler, `ps_servers` servers and the workers as three concurrent steps, told their
              role by DMLC_* variables; servers get `ps_server_nodes` nodes of their own when asked.

And one style that starts no workers itself:

- sweep:      the script runs `command` (a `ddlbench sweep`) once, on the first node; the harness then
              runs each cell as a job step over the nodes it needs (harness.launch.srun), starting
              each backend the way above, so a failed cell is recorded and the sweep goes on.

There is no accounting database on the machines this is tested on, so state comes from
`scontrol show job`, polled (`sbatch --wait` polls too slowly for short jobs).
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from harness.errors import UserError
from harness.launch.slurm_env import PORT_BASE, PORT_SPAN

LAUNCH_STYLES = ("srun", "deepspeed", "horovodrun", "byteps")
"""Styles in which the script's tasks are the workers."""
SWEEP_STYLE = "sweep"
"""Style in which the script runs a ddlbench sweep once and the harness launches each cell."""
FINAL_STATES = frozenset({
    "COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "PREEMPTED", "BOOT_FAIL",
    "DEADLINE", "OUT_OF_MEMORY", "REVOKED", "SPECIAL_EXIT",
})
"""Job states after which nothing more happens (`man squeue`, JOB STATE CODES)."""


@dataclass(frozen=True)
class SbatchSpec:
    job_name: str
    """Name shown by squeue; `%x` in the output pattern."""
    command: tuple[str, ...]
    """argv each worker runs (a list is accepted and stored as a tuple)."""
    nodes: int = 1
    """Nodes running workers (byteps: plus `ps_server_nodes`)."""
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
    """How workers start: one of LAUNCH_STYLES, or SWEEP_STYLE (see the module docstring)."""
    notes: tuple[str, ...] = ()
    """Comment lines under the script's first line: what it is for, what to edit, how to submit it."""
    variables: tuple[tuple[str, str, str], ...] = ()
    """Shell variables set before the launch, as (name, value, comment); the value is written as is
    (shell syntax, e.g. '${DDLBENCH_SWEEP:-sweep.yaml}'), and command words may use them as ${NAME}."""
    master_port: int | None = None
    """Rendezvous port; None derives it from the job id like harness.launch.slurm_env.port_for_job."""
    horovod_controller: str = "gloo"
    """horovodrun only: "gloo" (horovodrun --gloo, reaches hosts over ssh) or "mpi" (mpirun)."""
    ps_servers: int = 1
    """byteps only: number of server processes."""
    ps_server_nodes: int = 0
    """byteps only: extra nodes holding only servers; 0 places servers on the worker nodes."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "command", tuple(str(a) for a in self.command))
        object.__setattr__(self, "extra_sbatch", tuple(self.extra_sbatch))
        object.__setattr__(self, "variables", tuple(tuple(v) for v in self.variables))
        object.__setattr__(self, "notes", tuple(self.notes))
        _validate(self)

    @property
    def workers(self) -> int:
        """Worker processes in the job."""
        return self.nodes * self.tasks_per_node

    @property
    def total_nodes(self) -> int:
        """Nodes to allocate: worker nodes, plus dedicated server nodes for byteps."""
        return self.nodes + (self.ps_server_nodes if self.launch == "byteps" else 0)


def _validate(s: SbatchSpec) -> None:
    if s.launch not in LAUNCH_STYLES + (SWEEP_STYLE,):
        raise UserError(f"unknown launch style {s.launch!r}; available: {', '.join(LAUNCH_STYLES)}, "
                        f"or {SWEEP_STYLE!r} for a script that runs a ddlbench sweep")
    if not s.command:
        raise UserError("the sbatch spec has an empty command; give the argv each worker runs")
    if not re.fullmatch(r"[A-Za-z0-9_.+-]+", s.job_name):
        raise UserError(f"job name {s.job_name!r} is not usable by Slurm; use letters, digits and _.+-")
    for name, value in (("nodes", s.nodes), ("tasks_per_node", s.tasks_per_node),
                        ("cpus_per_task", s.cpus_per_task), ("time_limit_min", s.time_limit_min),
                        ("ps_servers", s.ps_servers)):
        if value < 1:
            raise UserError(f"{name}={value} in the sbatch spec; it must be at least 1")
    if s.gpus_per_node < 0 or s.ps_server_nodes < 0:
        raise UserError("gpus_per_node and ps_server_nodes must not be negative")
    if s.horovod_controller not in ("gloo", "mpi"):
        raise UserError(f"horovod_controller {s.horovod_controller!r} unknown; use 'gloo' or 'mpi'")
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
        (f"--nodes={s.total_nodes}", _nodes_comment(s)),
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
    if s.total_nodes != s.nodes:
        return f"{s.nodes} worker node(s) + {s.ps_server_nodes} parameter-server node(s)"
    return "nodes in the allocation"


def _port_line(s: SbatchSpec) -> str:
    if s.master_port is not None:
        return f"export MASTER_PORT={s.master_port}"
    return (f"export MASTER_PORT=${{MASTER_PORT:-$(({PORT_BASE} + SLURM_JOB_ID % {PORT_SPAN}))}}"
            "  # = harness.launch.slurm_env.port_for_job")


_RENDEZVOUS = """\
# Rendezvous on the first node of the allocation, at the address Slurm uses for it (NodeAddr):
# node names need not resolve. Exported, so every task agrees without asking the controller.
mapfile -t HOSTS < <(scontrol show hostnames "$SLURM_JOB_NODELIST")
MASTER_ADDR=$(scontrol show node "${HOSTS[0]}" | grep -o 'NodeAddr=[^ ]*' | cut -d= -f2 || true)
export MASTER_ADDR=${MASTER_ADDR:-${HOSTS[0]}}
"""


def render_sbatch(spec: SbatchSpec) -> str:
    """The complete batch script for `spec` (pure: same spec, same text)."""
    directives = _directives(spec)
    width = max(len(opt) for opt, _ in directives)
    if spec.launch == SWEEP_STYLE:
        what = (f"a ddlbench sweep on up to {spec.nodes} nodes x {spec.tasks_per_node} workers, one job step "
                f"per cell")
    else:
        what = f"{spec.workers} workers ({spec.nodes} nodes x {spec.tasks_per_node}), launched with {spec.launch}"
    lines = [
        "#!/bin/bash",
        f"# {spec.job_name}: {what}. Written by harness/launch/sbatch.py.",
        *(f"# {line}".rstrip() for line in spec.notes),
        *(f"#SBATCH {opt.ljust(width)}  # {why}" for opt, why in directives),
        "",
        "set -euo pipefail",
        *(f"export {k}={shlex.quote(str(v))}" for k, v in sorted(spec.env.items())),
        *_variables(spec),
    ]
    if spec.launch == SWEEP_STYLE:
        return "\n".join(lines) + "\n" + _launch_sweep(spec)
    return "\n".join(lines) + "\n" + _RENDEZVOUS + _port_line(spec) + "\n" + (
        'echo "job $SLURM_JOB_ID: ${#HOSTS[@]} nodes (${HOSTS[*]}), rendezvous $MASTER_ADDR:$MASTER_PORT"\n'
        "\n" + _LAUNCHERS[spec.launch](spec))


def _variables(spec: SbatchSpec) -> list[str]:
    if not spec.variables:
        return []
    width = max(len(f"{name}={value}") for name, value, _ in spec.variables)
    return [""] + [(f"{name}={value}".ljust(width) + f"  # {why}") if why else f"{name}={value}"
                   for name, value, why in spec.variables]


_VAR_WORD = re.compile(r"(?:[\w./:=@%+,-]|\$\{[A-Za-z_]\w*\})*\$\{[A-Za-z_]\w*\}(?:[\w./:=@%+,-]|\$\{[A-Za-z_]\w*\})*")


def _word(arg: str) -> str:
    """One command word: quoted as is, except that ${NAME} references to the script's variables stay
    live (in double quotes)."""
    return f'"{arg}"' if _VAR_WORD.fullmatch(arg) else shlex.quote(arg)


def _argv(spec: SbatchSpec) -> str:
    return " ".join(_word(a) for a in spec.command)


def _step_cpus(spec: SbatchSpec) -> str:
    # "The number of cpus per task specified for salloc or sbatch is not automatically inherited by
    # srun" (man srun, Slurm 22.05, --cpus-per-task): without it a step gives each worker one core.
    # Saying it again is right for every version.
    return f"--cpus-per-task={spec.cpus_per_task}"


def _launch_srun(spec: SbatchSpec) -> str:
    return (
        "# One task per worker; each reads its rank from SLURM_* (harness.launch.slurm_env).\n"
        "# --kill-on-bad-exit: one failed rank ends the step instead of leaving the others hung.\n"
        f"srun --kill-on-bad-exit=1 {_step_cpus(spec)} {_argv(spec)}\n"
    )


def _launch_deepspeed(spec: SbatchSpec) -> str:
    return (
        "# One task per worker with the torch variables deepspeed.init_distributed reads.\n"
        "export DDLBENCH_LAUNCHER=slurm\n"
        f"srun --kill-on-bad-exit=1 {_step_cpus(spec)} bash -c '\n"
        "  export RANK=$SLURM_PROCID WORLD_SIZE=$SLURM_NTASKS\n"
        "  export LOCAL_RANK=$SLURM_LOCALID LOCAL_WORLD_SIZE=$SLURM_NTASKS_PER_NODE\n"
        "  export NODE_RANK=$SLURM_NODEID\n"
        "  exec \"$@\"' ddlbench-task " + _argv(spec) + "\n"
    )


def _launch_horovodrun(spec: SbatchSpec) -> str:
    flag = "--gloo" if spec.horovod_controller == "gloo" else "--mpi"
    reach = ("workers on other nodes are started over ssh (passwordless ssh between nodes is needed)"
             if flag == "--gloo" else "mpirun starts the workers on the other nodes")
    return (
        f"# horovodrun is the job's launcher: one copy on the first node drives all {spec.workers} workers;\n"
        f"# {reach}.\n"
        f"HOROVOD_HOSTS=$(printf '%s:{spec.tasks_per_node},' \"${{HOSTS[@]}}\")\n"
        "# Its step gets the node's cores for all local workers (steps do not inherit sbatch's).\n"
        f"srun --kill-on-bad-exit=1 --nodes=1 --ntasks=1 --cpus-per-task={spec.tasks_per_node * spec.cpus_per_task} "
        f"--nodelist=\"${{HOSTS[0]}}\" \\\n"
        f"  horovodrun {flag} -np {spec.workers} -H \"${{HOROVOD_HOSTS%,}}\" \\\n"
        f"  {_argv(spec)}\n"
    )


def _launch_byteps(spec: SbatchSpec) -> str:
    # Servers go on the dedicated nodes after the workers' when there are any, else on the first
    # worker nodes; never more server nodes than servers (srun refuses a node list longer than --nodes).
    first = spec.nodes if spec.ps_server_nodes else 0
    pool = spec.ps_server_nodes or spec.nodes
    server_nodes = min(pool, spec.ps_servers)
    where = "on nodes of their own" if spec.ps_server_nodes else "colocated with the workers"
    return (
        "# BytePS roles (DMLC_*): one scheduler, the servers, and the workers, as three concurrent steps.\n"
        "# DMLC_NUM_WORKER counts worker nodes; BYTEPS_LOCAL_RANK/SIZE place a worker within its node.\n"
        f"export DMLC_NUM_WORKER={spec.nodes} DMLC_NUM_SERVER={spec.ps_servers}\n"
        "# The scheduler listens next to MASTER_PORT, which stays free for torch.distributed.\n"
        "export DMLC_PS_ROOT_URI=$MASTER_ADDR DMLC_PS_ROOT_PORT=$((MASTER_PORT + 1))\n"
        f"WORKER_NODES=$(IFS=,; echo \"${{HOSTS[*]:0:{spec.nodes}}}\")\n"
        f"SERVER_NODES=$(IFS=,; echo \"${{HOSTS[*]:{first}:{server_nodes}}}\")  # {where}\n"
        "# --overlap: the scheduler and servers share CPUs with the workers' step.\n"
        "srun --overlap --nodes=1 --ntasks=1 --nodelist=\"${HOSTS[0]}\" \\\n"
        "  env DMLC_ROLE=scheduler bpslaunch &\n"
        "SCHEDULER=$!\n"
        f"srun --overlap --nodes={server_nodes} --ntasks={spec.ps_servers} --nodelist=\"$SERVER_NODES\" \\\n"
        "  env DMLC_ROLE=server bpslaunch &\n"
        "SERVERS=$!\n"
        "status=0\n"
        f"srun --kill-on-bad-exit=1 --nodes={spec.nodes} --ntasks={spec.workers} "
        f"--ntasks-per-node={spec.tasks_per_node} {_step_cpus(spec)} --nodelist=\"$WORKER_NODES\" bash -c '\n"
        "  export DMLC_ROLE=worker DMLC_WORKER_ID=$SLURM_NODEID\n"
        "  export BYTEPS_LOCAL_RANK=$SLURM_LOCALID BYTEPS_LOCAL_SIZE=$SLURM_NTASKS_PER_NODE\n"
        "  exec \"$@\"' ddlbench-task " + _argv(spec) + " || status=$?\n"
        "# Workers are done: the scheduler and servers have nothing left to serve.\n"
        "kill \"$SCHEDULER\" \"$SERVERS\" 2>/dev/null || true\n"
        "wait || true\n"
        "exit \"$status\"\n"
    )


def _launch_sweep(spec: SbatchSpec) -> str:
    return (
        "\n"
        "# The sweep runs here, on the first node. Each cell becomes one job step over the nodes it needs\n"
        "# (harness/launch/srun.py): a failed or hung cell is recorded and the sweep goes on; cells\n"
        "# already on disk are skipped when the job is submitted again (--resume).\n"
        'echo "job ${SLURM_JOB_ID}: nodes ${SLURM_JOB_NODELIST}"\n'
        f"{_argv(spec)}\n"
    )


_LAUNCHERS = {
    "srun": _launch_srun,
    "deepspeed": _launch_deepspeed,
    "horovodrun": _launch_horovodrun,
    "byteps": _launch_byteps,
}


# ------------------------------------------------------------------------------- submit and follow

def _slurm(tool: str, args: list[str], timeout_s: float = 30.0,
           cwd: str | Path | None = None, stdin: str | None = None) -> subprocess.CompletedProcess:
    """Run a Slurm client; a missing tool or an unreachable controller is a UserError."""
    exe = shutil.which(tool)
    if exe is None:
        raise UserError(f"`{tool}` is not installed, so jobs cannot be sent to Slurm; run on a Slurm "
                        f"login node, or start a local test cluster with slurm/local/up.sh")
    try:
        res = subprocess.run([exe, *args], input=stdin, capture_output=True, text=True,
                             timeout=timeout_s, cwd=cwd)
    except subprocess.TimeoutExpired:
        raise UserError(f"`{tool} {' '.join(args)}` got no answer within {timeout_s:.0f} s, so the Slurm "
                        f"controller looks unreachable; check `scontrol ping`") from None
    err = (res.stderr or "").strip()
    if res.returncode != 0 and re.search(r"Unable to contact slurm controller|Connection refused|"
                                         r"Zero Bytes were transmitted|Socket timed out|"
                                         r"Could not establish a configuration source|"
                                         r"Invalid authentication credential|Munge", err, re.I):
        first = err.splitlines()[0] if err else "no message"
        raise UserError(f"the Slurm controller is unreachable ({tool}: {first}); check `scontrol ping` "
                        f"and that slurmctld and munged run (locally: slurm/local/up.sh)")
    return res


def submit(script_text: str, workdir: str | Path) -> str:
    """Submit a batch script with `sbatch --parsable`, running in `workdir`; returns the job id.

    The script is also written to workdir/<job name>.sbatch.sh for the record (and for resubmission)."""
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    m = re.search(r"^#SBATCH --job-name=(\S+)", script_text, re.M)
    (workdir / f"{m.group(1) if m else 'job'}.sbatch.sh").write_text(script_text)
    # sbatch does not create the directory of --output; without it the job runs but its log is lost.
    out = re.search(r"^#SBATCH --output=(\S+)", script_text, re.M)
    if out and "%" not in str(Path(out.group(1)).parent):
        (workdir / Path(out.group(1)).parent).mkdir(parents=True, exist_ok=True)
    res = _slurm("sbatch", ["--parsable"], cwd=workdir, stdin=script_text)
    if res.returncode != 0:
        first = (res.stderr.strip().splitlines() or ["no message"])[0]
        raise UserError(f"sbatch refused the job: {first}; fix the resources or options it names")
    # --parsable prints "jobid" or "jobid;cluster".
    return res.stdout.strip().split(";")[0]


def job_state(job_id: str | int) -> str:
    """Current state (PENDING, RUNNING, COMPLETED, FAILED, CANCELLED, ...) from `scontrol show job`.

    Slurm forgets a finished job after MinJobAge (300 s by default); then this says "UNKNOWN"."""
    res = _slurm("scontrol", ["show", "job", "--oneliner", str(job_id)])
    if res.returncode != 0:
        return "UNKNOWN"
    m = re.search(r"\bJobState=(\S+)", res.stdout)
    return m.group(1) if m else "UNKNOWN"


def wait_job(job_id: str | int, timeout_s: float, poll_s: float = 0.5) -> str:
    """Poll job_state until a final state (FINAL_STATES) and return it; "UNKNOWN" once the controller
    forgot the job; raises TimeoutError (the job keeps running: cancel() it if you mean to)."""
    deadline = time.monotonic() + timeout_s
    while True:
        state = job_state(job_id)
        if state in FINAL_STATES or state == "UNKNOWN":
            return state
        if time.monotonic() >= deadline:
            raise TimeoutError(f"Slurm job {job_id} still {state} after {timeout_s:.0f} s")
        time.sleep(poll_s)


def cancel(job_id: str | int) -> None:
    """Cancel the job (scancel); a job that already ended is not an error."""
    _slurm("scancel", [str(job_id)])
