"""Who am I inside a Slurm job step: rank, world and rendezvous address from the SLURM_* variables.

    srun python -c "import os; from harness.launchers.srun.env import from_slurm; print(from_slurm(os.environ))"

`from_environ` (harness.launchers.identity) calls `from_slurm` when SLURM_PROCID and SLURM_NTASKS are set and
the torch-style RANK/WORLD_SIZE are not. Each srun task is one process of the job (a worker, or a
parameter server placed after the workers). The variables are documented in `man srun`, section
"OUTPUT ENVIRONMENT VARIABLES".

The rendezvous host is the first node of the step's node list (rank 0 runs there under srun's block
and cyclic distributions), resolved to the address Slurm itself uses for that node (`NodeAddr`), because
node names need not resolve in DNS (they do not in slurm/local, where n1 and n2 are 127.0.0.1).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Mapping

from harness.contracts.hostlist import expand_hostlist, expand_tasks_per_node
from harness.contracts.identity import RankIdentity
from harness.contracts.rendezvous import port_for_job
from harness.core.errors import UserError

SCONTROL_TIMEOUT_S = 10.0
"""Longest wait for one scontrol call (the controller's MessageTimeout defaults to 10 s)."""


def _scontrol(*args: str) -> str | None:
    """stdout of `scontrol args`, or None when scontrol is missing, fails or hangs."""
    exe = shutil.which("scontrol")
    if exe is None:
        return None
    try:
        res = subprocess.run([exe, *args], capture_output=True, text=True, timeout=SCONTROL_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return res.stdout if res.returncode == 0 else None


def hostnames(nodelist: str, use_scontrol: bool = True) -> list[str]:
    """Node names of a hostlist: `scontrol show hostnames` (Slurm's own parser) when it is on PATH,
    else expand_hostlist."""
    if use_scontrol:
        out = _scontrol("show", "hostnames", nodelist)
        if out and out.strip():
            return out.split()
    return expand_hostlist(nodelist)


def node_addr(name: str, use_scontrol: bool = True) -> str:
    """The address Slurm reaches node `name` at (its NodeAddr), else the name itself."""
    if use_scontrol:
        out = _scontrol("show", "node", name)
        m = re.search(r"\bNodeAddr=(\S+)", out or "")
        if m and m.group(1) not in ("(null)", ""):
            return m.group(1)
    return name


def _int(env: Mapping[str, str], *names: str, default: int | None = None) -> int:
    """The first of `names` set in env, as an int (UserError naming the variable when it is not one)."""
    for name in names:
        value = env.get(name)
        if value not in (None, ""):
            try:
                return int(value)
            except ValueError:
                raise UserError(
                    f"{name}={value!r} is not an integer, so the Slurm rank layout is unknown; "
                    f"unset it or run the harness through srun, which sets it"
                ) from None
    if default is None:
        raise UserError(
            f"{' / '.join(names)} is not set, so the Slurm rank layout is unknown; "
            f"launch each task with srun inside an allocation (salloc/sbatch)"
        )
    return default


def from_slurm(environ: Mapping[str, str], use_scontrol: bool | None = None) -> RankIdentity:
    """RankIdentity of this task from Slurm's variables (see the module docstring).

    Step-level variables win over job-level ones (an srun step may use part of the allocation).
    MASTER_ADDR / MASTER_PORT, when set (job scripts from sbatch.render_sbatch export them), win over
    the derived ones, so every task agrees without each asking the controller. `use_scontrol=None`
    uses scontrol when it is on PATH; False keeps this function pure (tests, login nodes)."""
    env = environ
    if use_scontrol is None:
        use_scontrol = shutil.which("scontrol") is not None
    world = _int(env, "SLURM_NTASKS", "SLURM_NPROCS")
    rank = _int(env, "SLURM_PROCID")
    nodes = _int(env, "SLURM_STEP_NUM_NODES", "SLURM_NNODES", "SLURM_JOB_NUM_NODES", default=1)
    node_rank = _int(env, "SLURM_NODEID", default=0)
    local_rank = _int(env, "SLURM_LOCALID", default=0)
    local_world = _local_world_size(env, node_rank, world, nodes)
    if not (0 <= rank < world and 0 <= local_rank < local_world and 0 <= node_rank < nodes):
        raise UserError(
            f"inconsistent Slurm variables: rank {rank} of {world}, local rank {local_rank} "
            f"of {local_world}, node {node_rank} of {nodes}; check that the harness runs "
            f"under srun and that nothing overrides SLURM_* by hand"
        )
    nodelist = env.get("SLURM_STEP_NODELIST") or env.get("SLURM_JOB_NODELIST") or env.get("SLURM_NODELIST", "")
    if env.get("MASTER_ADDR"):
        master = env["MASTER_ADDR"]
    elif nodelist:
        try:
            first = hostnames(nodelist, use_scontrol)[0]
        except (ValueError, IndexError):
            raise UserError(
                f"cannot read the Slurm node list {nodelist!r}; set MASTER_ADDR to rank 0's host to bypass it"
            ) from None
        master = node_addr(first, use_scontrol)
    else:
        master = "127.0.0.1"  # a one-node step that lost its node list: rank 0 is here
    job_id = env.get("SLURM_JOB_ID") or env.get("SLURM_JOBID")
    port = _int(env, "MASTER_PORT", default=port_for_job(job_id))
    return RankIdentity(
        rank=rank,
        world_size=world,
        local_rank=local_rank,
        local_world_size=local_world,
        master_addr=master,
        master_port=port,
        node_rank=node_rank,
        nodes=nodes,
        source="slurm",
        extra={
            "slurm_job_id": job_id,
            "slurm_nodelist": env.get("SLURM_JOB_NODELIST") or env.get("SLURM_NODELIST"),
            "slurm_step_id": env.get("SLURM_STEP_ID") or env.get("SLURM_STEPID"),
        },
    )


def _local_world_size(env: Mapping[str, str], node_rank: int, world: int, nodes: int) -> int:
    """Tasks on this node: the exact per-node count Slurm gives (uneven layouts like '2,1' included),
    else the requested --ntasks-per-node, else an even split."""
    for name in ("SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE"):
        text = env.get(name)
        if text:
            try:
                counts = expand_tasks_per_node(text)
            except ValueError:
                raise UserError(
                    f"{name}={text!r} is not Slurm's 'N(xM),K' form; unset it or run the "
                    f"harness through srun, which sets it"
                ) from None
            if node_rank < len(counts):
                return counts[node_rank]
    if env.get("SLURM_NTASKS_PER_NODE"):
        return _int(env, "SLURM_NTASKS_PER_NODE")
    return max(1, -(-world // max(1, nodes)))
