"""How the `horovod` backend is started by each launcher, the ways Horovod users start jobs
(docs/ARCHITECTURE.md, "Backend"):

- one box: `horovodrun -np W -H localhost:W --gloo [--fusion-threshold-mb N --cycle-time-ms T] python -m
  harness.rank.worker ...`; the `horovod` scheme's knobs become horovodrun's own flags, which set
  HOROVOD_FUSION_THRESHOLD / HOROVOD_CYCLE_TIME for every rank before hvd.init();
- srun, variant `srun` (default): one srun task per rank with the variables horovodrun gives each slot
  (HOROVOD_RANK, ..., set by the `horovod` shim style); this process runs the gloo rendezvous server
  horovodrun would run (`srun_session`);
- srun, variant `horovodrun` (DDLBENCH_HOROVOD_LAUNCH=horovodrun): `horovodrun --gloo -H node:slots,...`
  from the first node, reaching the others by ssh; the `horovodrun` shim style maps HOROVOD_* back to
  the rank variables and drops the batch step's SLURM_*;
- batch scripts: the `horovodrun` launch style.
"""

from __future__ import annotations

import contextlib
import dataclasses
import socket
from collections.abc import Mapping

from harness.contracts.hostlist import expand_tasks_per_node
from harness.contracts.identity import RankIdentity
from harness.contracts.recipes.sbatch import REFERENCE_COMMAND, SbatchStyle
from harness.contracts.recipes.srun import SrunContext, Step
from harness.core.errors import CellFailed
from harness.launchers.identity import from_slurm
from harness.networks.netif import iface_towards
from harness.procs.argv import argv_words, launcher_exe, python_argv, worker_argv
from harness.procs.env import base_env
from harness.procs.framework import prepare_cell_dir, run_supervised

MB = 1 << 20
LAUNCH_VAR = "DDLBENCH_HOROVOD_LAUNCH"
"""srun (default) or horovodrun: how cells on this backend start inside an allocation."""


NODES_REFUSAL = (
    "backend horovod starts its ranks with its own launch program (horovodrun), which the multi-node "
    "launcher does not drive; run its cells under Slurm (`--launcher srun`) or on one box"
)
"""Why `ddlbench sweep` run on every node cannot start Horovod's ranks (harness/launchers/nodes/launcher.py)."""


def knob_env(knobs: Mapping) -> dict[str, str]:
    """The `horovod` scheme's knobs as the variables hvd.init() reads (horovodrun sets the same from
    --fusion-threshold-mb / --cycle-time-ms; harness/schemes/horovod_native.py checks them)."""
    env = {}
    if knobs.get("fusion_threshold_mb") is not None:
        env["HOROVOD_FUSION_THRESHOLD"] = str(int(knobs["fusion_threshold_mb"]) * MB)
    if knobs.get("cycle_time_ms") is not None:
        env["HOROVOD_CYCLE_TIME"] = str(float(knobs["cycle_time_ms"]))
    return env


def _knob_flags(knobs: Mapping) -> list[str]:
    flags = []
    if knobs.get("fusion_threshold_mb") is not None:
        flags += ["--fusion-threshold-mb", str(int(knobs["fusion_threshold_mb"]))]
    if knobs.get("cycle_time_ms") is not None:
        flags += ["--cycle-time-ms", str(float(knobs["cycle_time_ms"]))]
    return flags


def horovodrun_identity(env: Mapping[str, str]) -> RankIdentity | None:
    """Who a rank is, from the variables horovodrun gives each slot (horovod/runner/gloo_run.py)."""
    if "HOROVOD_RANK" not in env or "HOROVOD_SIZE" not in env:
        return None
    world = int(env["HOROVOD_SIZE"])
    local_world = int(env.get("HOROVOD_LOCAL_SIZE", world))
    return RankIdentity(
        rank=int(env["HOROVOD_RANK"]),
        world_size=world,
        local_rank=int(env.get("HOROVOD_LOCAL_RANK", env["HOROVOD_RANK"])),
        local_world_size=local_world,
        master_addr=env.get("HOROVOD_GLOO_RENDEZVOUS_ADDR", env.get("MASTER_ADDR", "127.0.0.1")),
        master_port=int(env.get("MASTER_PORT", "29500")),
        node_rank=int(env.get("HOROVOD_CROSS_RANK", "0")),
        nodes=int(env.get("HOROVOD_CROSS_SIZE", max(1, world // max(1, local_world)))),
        source="horovodrun",
    )


# ------------------------------------------------------------------------------------------- one box


def launch_local(cell, cell_dir, placement=None):
    """Run the cell through horovodrun on this box; returns rank 0's result.json or raises CellFailed."""
    cell_dir = prepare_cell_dir(cell, cell_dir, placement)
    w = cell.workers
    argv = [
        launcher_exe("horovodrun"),
        "-np",
        str(w),
        "-H",
        f"localhost:{w}",
        "--gloo",
        *_knob_flags(cell.knobs or {}),
        *python_argv(),
        *worker_argv(cell_dir),
    ]
    # gloo binds the interface it is told, else the one the hostname resolves to: the cell's network
    # (loopback on one box)
    env = base_env(cell.threads, "horovodrun", cell.network_vars(1))
    return run_supervised(argv, env, cell.timeout_s, cell_dir, "horovodrun")


# ------------------------------------------------------------------------------------------- srun


def srun_variant(environ: Mapping[str, str]) -> str:
    return environ.get(LAUNCH_VAR, "srun")


@contextlib.contextmanager
def srun_session(ctx: SrunContext):
    """Start the HTTP rendezvous server horovodrun would start, with the same slot plan (variant srun)."""
    if (ctx.variant or "srun") != "srun":
        yield ctx
        return
    try:  # optional: only this backend needs Horovod
        from horovod.runner.common.util.hosts import get_host_assignments, parse_hosts
        from horovod.runner.http.http_server import RendezvousServer
    except ImportError:
        raise CellFailed(
            "backend horovod needs the horovod package on the node running the sweep; "
            "install it (scripts/install_frameworks.sh horovod)"
        ) from None
    workers = ctx.workers
    slots = ",".join(f"{h}:{workers.count(h)}" for h in dict.fromkeys(workers))
    server = RendezvousServer(verbose=0)
    port = server.start()
    server.init(get_host_assignments(parse_hosts(slots), ctx.cell.workers))
    here = ctx.alloc.here
    try:
        yield dataclasses.replace(ctx, rendezvous=(ctx.addr_of(here) if here else socket.gethostname(), port))
    finally:
        server.stop()


def srun_plan(ctx: SrunContext) -> list[Step]:
    """Variant srun: one srun task per rank, each given Horovod's slot variables by the shim; variant
    horovodrun: one horovodrun from this node over every worker node."""
    common = {**ctx.common_env(), **knob_env(ctx.cell.knobs or {})}
    workers = ctx.workers
    if (ctx.variant or "srun") == "horovodrun":
        slots = ",".join(f"{h}:{workers.count(h)}" for h in dict.fromkeys(workers))
        if len(set(workers)) == 1 and workers[0] == ctx.alloc.here:
            slots = f"localhost:{ctx.cell.workers}"  # one node, this one: no ssh needed
        argv = [
            launcher_exe("horovodrun"),
            "--gloo",
            "-np",
            str(ctx.cell.workers),
            "-H",
            slots,
            *_knob_flags(ctx.cell.knobs or {}),
            *ctx.shim("horovodrun"),
            "--log-dir",
            str(ctx.cell_dir),
            "--",
            *ctx.command,
        ]
        return [Step("horovodrun", tuple(argv), env=common)]
    if ctx.rendezvous is None:
        raise ValueError("horovod over srun needs the rendezvous server's address (srun_session)")
    env = {
        **common,
        "HOROVOD_GLOO_RENDEZVOUS_ADDR": ctx.rendezvous[0],
        "HOROVOD_GLOO_RENDEZVOUS_PORT": str(ctx.rendezvous[1]),
    }
    argv = [*ctx.srun(workers, ctx.cpus, ctx.name, ctx.out), *ctx.shim("horovod"), "--", *ctx.command]
    return [Step("workers", tuple(argv), tuple(workers), env)]


def horovod_task_env(environ: Mapping[str, str]) -> dict[str, str | None]:
    """The variables horovodrun gives each slot (horovod/runner/gloo_run.py), from the task's SLURM_*."""
    e = from_slurm(environ)
    counts = expand_tasks_per_node(
        environ.get("SLURM_STEP_TASKS_PER_NODE") or environ.get("SLURM_TASKS_PER_NODE", str(e.world_size))
    )
    # Horovod's cross communicator joins the ranks with the same local rank, one per node
    # (horovod.runner.common.util.hosts.get_host_assignments); block placement makes those
    # nodes a prefix of the node list.
    cross_size = sum(1 for c in counts if c > e.local_rank)
    iface = environ.get("GLOO_SOCKET_IFNAME") or iface_towards(environ["HOROVOD_GLOO_RENDEZVOUS_ADDR"])
    return {
        "HOROVOD_RANK": str(e.rank),
        "HOROVOD_SIZE": str(e.world_size),
        "HOROVOD_LOCAL_RANK": str(e.local_rank),
        "HOROVOD_LOCAL_SIZE": str(e.local_world_size),
        "HOROVOD_CROSS_RANK": str(e.node_rank),
        "HOROVOD_CROSS_SIZE": str(cross_size),
        "HOROVOD_HOSTNAME": environ.get("SLURMD_NODENAME", socket.gethostname()),
        "HOROVOD_CONTROLLER": "gloo",
        "HOROVOD_CPU_OPERATIONS": "gloo",
        "HOROVOD_GLOO_IFACE": iface,
    }


def horovodrun_task_env(environ: Mapping[str, str]) -> dict[str, str | None]:
    """Under horovodrun: its rank wins over the batch step's SLURM_* (dropped)."""
    out: dict[str, str | None] = {k: None for k in environ if k.startswith("SLURM_")}
    out.update(
        RANK=environ["HOROVOD_RANK"],
        WORLD_SIZE=environ["HOROVOD_SIZE"],
        LOCAL_RANK=environ["HOROVOD_LOCAL_RANK"],
        LOCAL_WORLD_SIZE=environ["HOROVOD_LOCAL_SIZE"],
        NODE_RANK=environ["HOROVOD_CROSS_RANK"],
        DDLBENCH_LAUNCHER="horovodrun",
    )
    return out


# ------------------------------------------------------------------------------------------- sbatch


def sbatch_horovodrun(spec) -> str:
    flag = "--gloo" if spec.horovod_controller == "gloo" else "--mpi"
    reach = (
        "workers on other nodes are started over ssh (passwordless ssh between nodes is needed)"
        if flag == "--gloo"
        else "mpirun starts the workers on the other nodes"
    )
    return (
        f"# horovodrun is the job's launcher: one copy on the first node drives all {spec.workers} workers;\n"
        f"# {reach}.\n"
        f"HOROVOD_HOSTS=$(printf '%s:{spec.tasks_per_node},' \"${{HOSTS[@]}}\")\n"
        "# Its step gets the node's cores for all local workers (steps do not inherit sbatch's).\n"
        f"srun --kill-on-bad-exit=1 --nodes=1 --ntasks=1 --cpus-per-task={spec.tasks_per_node * spec.cpus_per_task} "
        f'--nodelist="${{HOSTS[0]}}" \\\n'
        f'  horovodrun {flag} -np {spec.workers} -H "${{HOROVOD_HOSTS%,}}" \\\n'
        f"  {argv_words(spec.command)}\n"
    )


SBATCH_STYLES = {
    "horovodrun": SbatchStyle(
        sbatch_horovodrun,
        reference=dict(
            job_name="ddl-horovod",
            command=(*REFERENCE_COMMAND, "--backend", "horovod"),
            nodes=2,
            tasks_per_node=4,
            gpus_per_node=4,
            cpus_per_task=8,
            launch="horovodrun",
            horovod_controller="gloo",
        ),
    )
}

SBATCH_EXAMPLES = (
    {
        "name": "horovod-srun",
        "sweep": "horovod",
        "nodes": 2,
        "env": {LAUNCH_VAR: "srun"},
        "notes": [
            "Horovod over srun: each cell is one srun step, one task per GPU, each told its place by",
            "Horovod's own variables (HOROVOD_RANK, HOROVOD_LOCAL_RANK, HOROVOD_CROSS_RANK, ...); the",
            "sweep runs the gloo rendezvous server horovodrun would run. Needs no ssh and no MPI.",
        ],
    },
    {
        "name": "horovod-horovodrun",
        "sweep": "horovod",
        "nodes": 2,
        "env": {LAUNCH_VAR: "horovodrun"},
        "notes": [
            "Horovod the classic way: for each cell, `horovodrun --gloo -H node:slots,...` on the first",
            "node starts the workers, reaching the other nodes over ssh: passwordless ssh between the",
            "allocation's nodes is required (use horovod-srun.sbatch where it is not).",
        ],
    },
)

SBATCH_SWEEPS = {
    "horovod": {
        "notes": [
            "Horovod (slurm/horovod-srun.sbatch, slurm/horovod-horovodrun.sbatch): Horovod's own",
            "DistributedOptimizer (tensor fusion) and the study's all-reduce methods on Horovod's transport.",
            "Needs the `horovod` backend to be usable on the nodes (`ddlbench list`).",
        ],
        "sweep": {
            "name": "horovod",
            "workloads": ["resnet50", "bert-base"],
            "schemes": ["horovod", "bsp-a2a", "wfbp-a2a", "mgwfbp", "bytescheduler-a2a"],
            "backends": ["horovod"],
            "workers": [1, 2, 4, 8],
            "device": "cuda",
            "warmup": 10,
            "iters": 30,
            "timeout_s": 900,
        },
    },
}
