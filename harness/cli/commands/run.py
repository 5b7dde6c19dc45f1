"""`ddlbench run`: one cell. On one box it spawns the worker processes itself; under torchrun (or
srun) it is itself one of the workers and rank 0 writes the tables (harness/experiment/run.py)."""

from __future__ import annotations

import os
from pathlib import Path

import click

from harness.cli.options import TRACE_META, cell_options, parse_knobs, trace_option
from harness.contracts.cell import CellSpec
from harness.core.errors import UserError
from harness.experiment.cells import resolve
from harness.experiment.execute import Interrupted
from harness.experiment.options import RunOptions
from harness.experiment.run import run_as_rank, run_cell
from harness.launchers.testbed.launcher import on_testbed
from harness.report.console import finish_run
from harness.results.store import new_run_id


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
        run_as_rank(cell, output)
        return

    options = RunOptions(output=output or Path("results") / new_run_id(f"{cell.workload}-{cell.scheme}"),
                         resume=resume, overwrite=overwrite, oversubscribe=oversubscribe, cold=cold)
    run_dir = options.output
    try:
        cell, launcher = on_testbed(cell, resolve) if testbed else (cell, None)
        run_dir = run_cell(cell, options, baseline, launcher)
    except Interrupted as e:
        ctx.exit(finish_run(run_dir, interrupted=e))
    ctx.exit(finish_run(run_dir, strict_network=strict_network))
