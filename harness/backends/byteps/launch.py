"""How the `byteps` backend is started by each launcher (docs/ARCHITECTURE.md, "Backend"): a BytePS job
is three concurrent sets of processes, told their role by DMLC_ROLE (roles.py).

- srun: three steps per cell: the scheduler (first worker node), the servers (spare nodes when the
  allocation has them, else beside the workers; harness/launchers/srun/context.py `place`), the workers (the
  `byteps` shim gives each its DMLC_WORKER_ID and BYTEPS_LOCAL_RANK/SIZE); the cell ends with the workers;
- batch scripts: the `byteps` launch style (the same three steps written in shell).
"""

from __future__ import annotations

from collections.abc import Mapping

from harness.backends.byteps.roles import shared_env
from harness.contracts.recipes.sbatch import REFERENCE_COMMAND, SbatchStyle
from harness.contracts.recipes.srun import SrunContext, Step
from harness.launchers.identity import from_slurm
from harness.procs.argv import argv_words, step_cpus


def srun_plan(ctx: SrunContext) -> list[Step]:
    workers, servers = ctx.workers, ctx.servers
    # The scheduler listens next to the cell's port, which stays free for torch.distributed.
    env = {**ctx.common_env(), **shared_env(len(set(workers)), ctx.cell.servers, ctx.master_addr, ctx.port + 1)}
    sched = ctx.srun([workers[0]], 1, ctx.name + ".scheduler", str(ctx.cell_dir / "scheduler.log"), True)
    serv = ctx.srun(servers, 1, ctx.name + ".servers", str(ctx.cell_dir / "server%t.log"), True)
    work = ctx.srun(workers, ctx.cpus, ctx.name, ctx.out)
    return [
        Step(
            "scheduler",
            tuple([*sched, "env", "DMLC_ROLE=scheduler", "bpslaunch"]),
            (workers[0],),
            env,
            main=False,
        ),
        Step(
            "servers",
            tuple([*serv, "env", "DMLC_ROLE=server", "bpslaunch"]),
            tuple(servers),
            env,
            main=False,
        ),
        Step("workers", tuple([*work, *ctx.shim("byteps"), "--", *ctx.command]), tuple(workers), env),
    ]


def byteps_task_env(environ: Mapping[str, str]) -> dict[str, str | None]:
    """BytePS counts worker machines; a worker's place in its machine is local."""
    e = from_slurm(environ)
    return {
        "DMLC_ROLE": "worker",
        "DMLC_WORKER_ID": str(e.node_rank),
        "BYTEPS_LOCAL_RANK": str(e.local_rank),
        "BYTEPS_LOCAL_SIZE": str(e.local_world_size),
    }


def _exports(env: dict) -> str:
    return "export " + " ".join(f"{k}={v}" for k, v in env.items()) + "\n"


def sbatch_byteps(spec) -> str:
    # Servers go on the dedicated nodes after the workers' when there are any, else on the first
    # worker nodes; never more server nodes than servers (srun refuses a node list longer than --nodes).
    first = spec.nodes if spec.ps_server_nodes else 0
    pool = spec.ps_server_nodes or spec.nodes
    server_nodes = min(pool, spec.ps_servers)
    where = "on nodes of their own" if spec.ps_server_nodes else "colocated with the workers"
    shared = shared_env(spec.nodes, spec.ps_servers, "$MASTER_ADDR", "$((MASTER_PORT + 1))")
    counts = {k: shared[k] for k in ("DMLC_NUM_WORKER", "DMLC_NUM_SERVER")}
    root = {k: shared[k] for k in ("DMLC_PS_ROOT_URI", "DMLC_PS_ROOT_PORT")}
    return (
        "# BytePS roles (DMLC_*): one scheduler, the servers, and the workers, as three concurrent steps.\n"
        "# DMLC_NUM_WORKER counts worker nodes; BYTEPS_LOCAL_RANK/SIZE place a worker within its node.\n"
        + _exports(counts)
        + "# The scheduler listens next to MASTER_PORT, which stays free for torch.distributed.\n"
        + _exports(root)
        + f'WORKER_NODES=$(IFS=,; echo "${{HOSTS[*]:0:{spec.nodes}}}")\n'
        f'SERVER_NODES=$(IFS=,; echo "${{HOSTS[*]:{first}:{server_nodes}}}")  # {where}\n'
        "# --overlap: the scheduler and servers share CPUs with the workers' step.\n"
        'srun --overlap --nodes=1 --ntasks=1 --nodelist="${HOSTS[0]}" \\\n'
        "  env DMLC_ROLE=scheduler bpslaunch &\n"
        "SCHEDULER=$!\n"
        f'srun --overlap --nodes={server_nodes} --ntasks={spec.ps_servers} --nodelist="$SERVER_NODES" \\\n'
        "  env DMLC_ROLE=server bpslaunch &\n"
        "SERVERS=$!\n"
        "status=0\n"
        f"srun --kill-on-bad-exit=1 --nodes={spec.nodes} --ntasks={spec.workers} "
        f"--ntasks-per-node={spec.tasks_per_node} {step_cpus(spec.cpus_per_task)} "
        f'--nodelist="$WORKER_NODES" bash -c \'\n'
        "  export DMLC_ROLE=worker DMLC_WORKER_ID=$SLURM_NODEID\n"
        "  export BYTEPS_LOCAL_RANK=$SLURM_LOCALID BYTEPS_LOCAL_SIZE=$SLURM_NTASKS_PER_NODE\n"
        '  exec "$@"\' ddlbench-task ' + argv_words(spec.command) + " || status=$?\n"
        "# Workers are done: the scheduler and servers have nothing left to serve.\n"
        'kill "$SCHEDULER" "$SERVERS" 2>/dev/null || true\n'
        "wait || true\n"
        'exit "$status"\n'
    )


SBATCH_STYLES = {
    "byteps": SbatchStyle(
        sbatch_byteps,
        extra_nodes=lambda spec: spec.ps_server_nodes,
        reference=dict(
            job_name="ddl-byteps",
            command=(*REFERENCE_COMMAND, "--backend", "byteps"),
            nodes=2,
            tasks_per_node=4,
            gpus_per_node=4,
            cpus_per_task=8,
            launch="byteps",
            ps_servers=2,
            ps_server_nodes=1,
            extra_sbatch=("--constraint=ib",),
        ),
    )
}

SBATCH_EXAMPLES = (
    {
        "name": "byteps",
        "sweep": "byteps",
        "nodes": 3,
        "notes": [
            "BytePS: 2 worker nodes + 1 node for the servers (the study used one server host per four",
            "workers). Per cell the sweep starts three steps, told their role by DMLC_ROLE: the scheduler",
            "(first node), the servers (on the nodes the workers leave free, else beside the workers)",
            "and the workers; DMLC_NUM_WORKER, DMLC_NUM_SERVER, DMLC_PS_ROOT_URI/PORT come from the layout.",
        ],
    },
)

SBATCH_SWEEPS = {
    "byteps": {
        "notes": [
            "BytePS (slurm/byteps.sbatch): BytePS's DistributedOptimizer, pushing and pulling through 2 BytePS",
            "servers per cell on the allocation's spare node. Needs BytePS on the nodes (`ddlbench list`; it cannot",
            "be installed on CPU-only machines).",
        ],
        "sweep": {
            "name": "byteps",
            "workloads": ["resnet50", "bert-base"],
            "schemes": ["byteps"],
            "backends": ["byteps"],
            "workers": [1, 2, 4, 8],
            "servers": [2],
            "device": "cuda",
            "warmup": 10,
            "iters": 30,
            "timeout_s": 900,
        },
    },
}
