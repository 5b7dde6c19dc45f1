"""`ddlbench sweep FILE.yaml`: a matrix of cells, with a progress bar, resumable.

Exit status 0 when every cell is ok, 1 when a cell failed (the summary is still printed and written),
2 on bad input, 128+N when signal N stopped the driver (finish with --resume)."""

from __future__ import annotations

import contextlib
import dataclasses
import os
from pathlib import Path

import click
import torch

from harness.cell import check_capacity, warn
from harness.commands.run import TRACE_META, trace_option
from harness.commands.show import finish_run
from harness.errors import UserError
from harness.execute import Interrupted, run_cells
from harness.launch.launchers import by_name, choose_launcher
from harness.launch.nodes import Leader, NodesFailed, check_cell, open_store, run_agent
from harness.launch.nodes_env import NodeJob, cell_nodes, node_job
from harness.launch.spawn import warm_ranks
from harness.results.files import check_output_dir
from harness.results.store import new_run_id
from harness.sweep import expand, load_sweep
from harness.testbed.sweep import run_on_testbed


def run_sweep(path: str | Path, output: Path | None = None, resume: bool = False,
              progress: bool = True, launcher: str | None = None, retry_failed: bool = False, *,
              overwrite: bool = False, oversubscribe: bool = False, server_hosts: str | None = None,
              trace: int | None = None, dtype: str | None = None, job: NodeJob | None = None,
              join_timeout_s: float = 300.0, cold: bool = False) -> Path:
    """Run every cell of the sweep file at `path` into `output` (default results/<run-id>); returns the
    run directory. An existing run there is refused unless `resume` or `overwrite`; `server_hosts`
    replaces the file's `server_hosts:`; `cold` (or the file's `cold: true`) starts ranks cold."""
    cfg = load_sweep(path)
    cold = cold or cfg.cold
    if trace is not None:  # --trace N replaces the file's `trace:` (docs/ARCHITECTURE.md, "Traces")
        cfg = dataclasses.replace(cfg, trace=trace)
    if server_hosts:
        cfg = dataclasses.replace(cfg, server_hosts=(server_hosts,))
    if dtype:  # --dtype replaces the file's `dtype:` (docs/ARCHITECTURE.md, "Precision")
        cfg = dataclasses.replace(cfg, dtype=(dtype,))
    if resume and output is None:
        raise UserError("--resume needs --output RUN_DIR: the run directory of the interrupted sweep")
    if retry_failed and not resume:
        raise UserError("--retry-failed re-runs the failed cells of a run: give it with --resume --output RUN_DIR")
    run_dir = output or Path("results") / new_run_id(cfg.name)
    check_output_dir(run_dir)
    if cfg.testbed or cfg.networks:
        return run_on_testbed(cfg, run_dir, resume, progress, retry_failed, overwrite=overwrite, cold=cold)
    if job is not None:  # node 0 of a multi-node job without Slurm (harness/launch/nodes.py)
        return _lead_nodes(cfg, path, run_dir, job, resume, overwrite, progress, retry_failed, join_timeout_s, cold)
    launch = choose_launcher(launcher)  # srun inside a Slurm allocation, else local
    cells = expand(cfg, nodes_for=launch.nodes_for)
    for c in cells if launch.check else ():
        launch.check(c)  # e.g. dedicated server hosts without a spare host: refused before anything runs
    for note in dict.fromkeys(check_capacity(c, oversubscribe or cfg.oversubscribe) for c in cells):
        warn(note)
    run_cells(cells, run_dir, run_dir.name, resume=resume, progress=progress, launcher=launch.launch,
              env_extra=launch.env_extra or None, retry_failed=retry_failed, new_run=True, overwrite=overwrite,
              files={"sweep.yaml": Path(path).read_text()}, cold=cold, zygote_here=launch.warm)
    return run_dir


def _per_node(job: NodeJob, device: str) -> int:
    """Workers a node runs: the scheduler's count, or (auto) one per GPU, one per CPU node."""
    if job.nproc_per_node:
        return job.nproc_per_node
    gpus = torch.cuda.device_count() if torch.cuda.is_available() and device != "cpu" else 0
    return gpus or 1


def _lead_nodes(cfg, path, run_dir: Path, job: NodeJob, resume, overwrite, progress, retry_failed,
                join_timeout_s: float, cold: bool) -> Path:
    """Node 0: plan the cells, meet the other nodes in the c10d store, run the cells through them."""
    job = dataclasses.replace(job, nproc_per_node=_per_node(job, cfg.device))
    cells = expand(cfg, nodes_for=lambda w: cell_nodes(w, job.nnodes, job.nproc_per_node))
    for c in cells:
        check_cell(c, job)  # refused before any node is waited for
    run_cells(cells, run_dir, run_dir.name, resume=resume, progress=progress, retry_failed=retry_failed,
              env_extra={"hosts": f"{job.nnodes} nodes ({job.source})"}, new_run=True, overwrite=overwrite,
              files={"sweep.yaml": Path(path).read_text()}, session=lambda: _leading(job, join_timeout_s),
              cold=cold)
    return run_dir


@contextlib.contextmanager
def _leading(job: NodeJob, join_timeout_s: float):
    """Node 0's launcher for the run: the c10d store opened and every node joined; at the end, whatever
    ended it, every agent is told (and ends its ranks)."""
    leader = Leader(open_store(job, join_timeout_s), job, join_timeout_s)
    why = "done"
    try:
        yield leader
    except BaseException as e:  # every agent ends with the leader, whatever ended it
        why = str(e) or type(e).__name__
        raise
    finally:
        leader.finish(why)


def nodes_option(f):
    """The plain node list's flags (as `torchrun --nnodes` takes them); they win over the scheduler's."""
    for name, kind, text in reversed((
            ("--nnodes", int, "Nodes in a multi-node job without Slurm; every node runs this same command."),
            ("--node-rank", int, "This node's index (0 leads: plans the cells, writes the run)."),
            ("--nproc-per-node", int, "Workers per node (default: the scheduler's, else one per GPU, one on CPU)."),
            ("--master-addr", str, "Node 0's address, where the c10d store listens."),
            ("--master-port", int, "The store's port (default 29400)."))):
        f = click.option(name, type=kind, help=text)(f)
    return click.option("--join-timeout", "join_timeout_s", default=300.0, show_default=True, type=float,
                        help="Seconds node 0 waits for every node to join (multi-node job).")(f)


@click.command("sweep")
@click.argument("sweep_file", type=click.Path())
@click.option("--output", type=click.Path(path_type=Path), help="Run directory (default results/<run-id>).")
@click.option("--resume", is_flag=True, help="Run only the cells missing from --output.")
@click.option("--overwrite", is_flag=True, help="Discard the run already in --output and measure it again.")
@click.option("--retry-failed", is_flag=True,
              help="With --resume: also run again the cells recorded as failed (measured cells stay).")
@click.option("--oversubscribe", is_flag=True,
              help="Allow more workers x threads than this box has cores (timings are then noise).")
@click.option("--allow-failed-cells", is_flag=True,
              help="Exit 0 even when cells failed (they stay recorded as failed): for batch jobs whose state "
                   "should say that the sweep ran, not how its cells fared.")
@trace_option("each cell (replaces the file's `trace:`)")
@click.option("--no-progress", is_flag=True, help="No progress bar (logs, CI).")
@click.option("--launcher", type=click.Choice(by_name()),
              help="How cells start: srun steps (default inside a Slurm allocation) or local processes.")
@click.option("--server-hosts", type=click.Choice(["auto", "dedicated", "colocated"]),
              help="PS cells: servers on hosts without workers, on the workers' hosts, or dedicated when a host "
                   "is spare (auto); replaces the sweep file's `server_hosts:`.")
@click.option("--dtype", help="Compute dtype of every cell, fp32 or bf16; replaces the sweep file's `dtype:`.")
@click.option("--strict-network", is_flag=True,
              help="Exit 1 when a multi-node cell's traffic did not go mainly through the interface its network "
                   "profile names (summary column net_check).")
@click.option("--cold", is_flag=True,
              help="Start every cell's ranks as fresh interpreters instead of forking them from one pre-imported "
                   "process (warm, the default): for comparison; replaces the sweep file's `cold:`.")
@nodes_option
@click.pass_context
def command(ctx, sweep_file, output, resume, overwrite, retry_failed, oversubscribe, allow_failed_cells,
            no_progress, launcher, strict_network, server_hosts, dtype, cold, join_timeout_s, **node_flags):
    """Run every cell of SWEEP_FILE and print the summary.

    Exit status 0 when every cell is ok, 1 when a cell failed (0 with --allow-failed-cells), 2 on bad
    input, 128+N when signal N stopped it (finish with --resume)."""
    cfg = load_sweep(sweep_file)
    # Kubeflow/JobSet/SkyPilot variables or the node-list flags: a multi-node job (harness/launch/nodes.py);
    # inside a Slurm allocation the variables of an outer scheduler are not ours unless the flags say so
    in_slurm = bool(os.environ.get("SLURM_JOB_ID")) and not any(node_flags.values())
    job = None if in_slurm or launcher else node_job(os.environ, node_flags)
    if output is None and not resume:
        output = Path("results") / new_run_id(cfg.name)
    try:
        if job is not None and job.node_rank > 0:  # an agent: no run directory of its own
            store = open_store(job, join_timeout_s)
            with warm_ranks(not (cold or cfg.cold)):
                ctx.exit(run_agent(store, job, Path(f"{output}.node{job.node_rank}")))
        run_dir = run_sweep(sweep_file, output, resume, progress=not no_progress, launcher=launcher,
                            trace=ctx.meta.get(TRACE_META),
                            retry_failed=retry_failed, overwrite=overwrite, oversubscribe=oversubscribe,
                            server_hosts=server_hosts, dtype=dtype, job=job, join_timeout_s=join_timeout_s,
                            cold=cold)
    except Interrupted as e:
        ctx.exit(finish_run(output, interrupted=e))
    except NodesFailed as e:  # the job cannot go on; what was measured is on disk
        click.echo(f"error: {e}", err=True)
        ctx.exit(1)
    code = finish_run(run_dir, strict_network=strict_network)
    ctx.exit(0 if code == 1 and allow_failed_cells else code)
