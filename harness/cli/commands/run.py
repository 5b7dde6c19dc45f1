"""`ddlbench run`: one cell. On one box it spawns the worker processes itself; under torchrun (or
srun) it is itself one of the workers and rank 0 writes the tables (harness/experiment/dispatch.py)."""

from __future__ import annotations

import dataclasses
import os

import click

from harness.cli.options import (
    TRACE_META,
    append_history,
    cell_options,
    history_option,
    parse_knobs,
    run_options,
    trace_option,
)
from harness.cli.runs_cells import FINISH, RunsCells
from harness.contracts.cell import CellSpec


@click.command("run", cls=RunsCells, go_on=FINISH)
@cell_options
@click.option("--knob", "knobs", multiple=True, help="Scheme knob NAME=VALUE (repeatable).")
@click.option(
    "--testbed",
    "launcher",
    flag_value="testbed",
    default=None,
    help="Run on the emulated testbed that is up (`ddlbench testbed up`); workers spread "
    "over its hosts (its launcher, harness/launchers/testbed/).",
)
@trace_option("the cell")
@click.option(
    "--baseline/--no-baseline", default=False, help="Also measure the 1-worker local baseline (speed-up, efficiency)."
)
@run_options
@history_option()
@click.pass_context
def command(ctx, knobs, launcher, baseline, options, strict_network, history, **settings):
    """Run one benchmark cell and print its summary.

    Exit status 0 when every cell is ok, 1 when a cell failed, 2 on bad input, 128+N when signal N
    stopped it (finish with --resume)."""
    # lazy: what runs the command, not what declares it (docs/ARCHITECTURE.md, "Commands")
    from harness.experiment.dispatch import run_as_rank, run_cell, started_as_rank
    from harness.report.console import finish_run

    cell = CellSpec(**settings, knobs=parse_knobs(knobs)).with_(trace_iters=ctx.meta.get(TRACE_META, 0))
    if started_as_rank(os.environ):  # torchrun/srun started this process as one rank of the cell
        run_as_rank(cell, options.output)
        return
    run_dir = run_cell(cell, dataclasses.replace(options, launcher=launcher), baseline)
    code = finish_run(run_dir, strict_network=strict_network)
    append_history(history, run_dir)
    ctx.exit(code)
