"""`ddlbench run`: one cell. On one box it spawns the worker processes itself; under torchrun (or
srun) it is itself one of the workers and rank 0 writes the tables."""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path

import click

from harness.cell import CellSpec, check_capacity, resolve, warn
from harness.commands.cell_options import cell_options
from harness.commands.show import finish_run
from harness.errors import UserError
from harness.execute import Interrupted, record_result, run_cells, write_environment
from harness.launch.env import from_environ
from harness.launch.srun_plan import check_one_box
from harness.results.files import check_output_dir
from harness.results.store import cell_dir, new_run_id
from harness.sweep import knob_value
from harness.testbed import netns
from harness.testbed.sweep import on_testbed
from harness.worker import run_worker


def parse_knobs(pairs: tuple[str, ...]) -> dict:
    out = {}
    for pair in pairs:
        k, _, v = pair.partition("=")
        if not _ or not k.strip():
            raise UserError(f"--knob {pair!r} is not NAME=VALUE; write e.g. --knob bucket_cap_mb=25")
        out[k.strip()] = knob_value(v)
    return out


TRACE_META = "ddlbench_trace_iters"


def trace_option(what: str):
    """`--trace [N]` (N = 3 when omitted): record a timeline of N measured iterations of every rank. Kept
    in the click context (ctx.meta[TRACE_META]) rather than passed as a parameter."""
    def keep(ctx, _param, value):
        if value is not None:
            ctx.meta[TRACE_META] = value
        return value
    return click.option("--trace", type=click.IntRange(min=1), is_flag=False, flag_value=3, default=None,
                        expose_value=False, callback=keep, metavar="[N]",
                        help=f"Record a timeline of the first N measured iterations (default 3) of every rank "
                             f"of {what} into the cell's trace.json (Perfetto, chrome://tracing); same cell id.")


def run_cell(cell: CellSpec, output: Path | None, baseline: bool = False, launcher=None, *,
             resume: bool = False, overwrite: bool = False, oversubscribe: bool = False, cold: bool = False) -> Path:
    """Resolve, run (plus the local baseline if asked) and record; returns the run directory.
    `launcher` as in run_cells (default: spawn the ranks on this box). An existing run directory is
    refused unless `resume` (skip its measured cells) or `overwrite` (discard it)."""
    cell = resolve(cell)
    if launcher is None:
        check_one_box(cell)  # dedicated server hosts need a host one box does not have
    warn(check_capacity(cell, oversubscribe))
    run_dir = output or Path("results") / new_run_id(f"{cell.workload}-{cell.scheme}")
    check_output_dir(run_dir)
    cells = [cell]
    if baseline and cell.scheme != "local":
        cells.insert(0, resolve(cell.with_(scheme="local", workers=1, servers=0, nodes=1, knobs={},
                                           backend="torch", server_hosts="auto")))
    run_cells(cells, run_dir, run_dir.name, resume=resume, overwrite=overwrite, new_run=True, launcher=launcher,
              cold=cold)
    return run_dir


def run_under_launcher(cell: CellSpec, output: Path) -> None:
    """Started by torchrun/srun: be one rank; rank 0 records the cell."""

    cell = resolve(cell)
    env = from_environ()
    if env.world_size != cell.workers + cell.servers:
        raise UserError(f"the launcher started {env.world_size} processes but the cell needs "
                        f"{cell.workers} workers + {cell.servers} servers; match --workers to it")
    d = cell_dir(output, cell.cell_id)
    d.mkdir(parents=True, exist_ok=True)
    if env.rank == 0:
        write_environment(output, output.name, cell.device, env.extra)
    result = run_worker(cell, env, d)
    if env.rank == 0 and result is not None:
        record_result(output, output.name, cell, json.loads(json.dumps(result)), 0.0)


@click.command("run")
@cell_options
@click.option("--knob", "knobs", multiple=True, help="Scheme knob NAME=VALUE (repeatable).")
@click.option("--testbed", is_flag=True,
              help="Run on the emulated testbed that is up (`ddlbench testbed up`); workers spread "
                   "over its hosts.")
@trace_option("the cell")
@click.option("--baseline/--no-baseline", default=False,
              help="Also measure the 1-worker local baseline (speed-up, efficiency).")
@click.option("--output", type=click.Path(path_type=Path), help="Run directory (default results/<run-id>).")
@click.option("--resume", is_flag=True, help="Into an existing --output: run only the cells it lacks.")
@click.option("--overwrite", is_flag=True, help="Discard the run already in --output and measure again.")
@click.option("--oversubscribe", is_flag=True,
              help="Allow more workers x threads than this box has cores (timings are then noise).")
@click.option("--strict-network", is_flag=True,
              help="Exit 1 when a multi-node cell's traffic did not go mainly through the interface its network "
                   "profile names (summary column net_check).")
@click.option("--cold", is_flag=True,
              help="Start the ranks as fresh interpreters instead of forking them from one pre-imported process.")
@click.pass_context
def command(ctx, knobs, testbed, baseline, output, resume, overwrite, oversubscribe, strict_network, cold,
            **settings):
    """Run one benchmark cell and print its summary.

    Exit status 0 when every cell is ok, 1 when a cell failed, 2 on bad input."""
    cell = CellSpec(**settings, knobs=parse_knobs(knobs))
    cell = cell.with_(trace_iters=ctx.meta.get(TRACE_META, 0))
    if "TORCHELASTIC_RUN_ID" in os.environ or os.environ.get("DDLBENCH_IN_LAUNCHER") == "1":
        if output is None:
            raise UserError("under torchrun/srun every rank must agree on the run directory: pass --output")
        run_under_launcher(cell, output)
        return

    launcher = None
    run_dir = output = output or Path("results") / new_run_id(f"{cell.workload}-{cell.scheme}")
    lease = netns.lease(f"ddlbench run {cell.workload} {cell.scheme} --testbed") if testbed else None
    try:
        with lease or contextlib.nullcontext():
            if testbed:
                cell, launcher = on_testbed(cell)
            run_dir = run_cell(cell, output, baseline, launcher, resume=resume, overwrite=overwrite,
                               oversubscribe=oversubscribe, cold=cold)
    except Interrupted as e:
        ctx.exit(finish_run(run_dir, interrupted=e))
    ctx.exit(finish_run(run_dir, strict_network=strict_network))
