"""`ddlbench sweep FILE.yaml`: a matrix of cells, with a progress bar, resumable, on whatever launcher the
environment and the file say (harness/experiment/dispatch.py, the one sweep path).

Exit status 0 when every cell is ok, 1 when a cell failed (the summary is still printed and written),
2 on bad input, 128+N when signal N stopped the driver (finish with --resume)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import click

from harness.cli.options import (
    TRACE_META,
    append_history,
    history_option,
    nodes_option,
    run_options,
    servers_option,
    stop_rule_options,
    trace_option,
)
from harness.cli.runs_cells import FINISH, RunsCells
from harness.contracts.launcher import Follows
from harness.core.errors import signals_raise
from harness.launchers.choose import ORDER


@click.command("sweep", cls=RunsCells, go_on=FINISH)
@click.argument("sweep_file", type=click.Path())
@run_options
@click.option(
    "--retry-failed",
    is_flag=True,
    help="With --resume: also run again the cells recorded as failed (measured cells stay).",
)
@click.option(
    "--allow-failed-cells",
    is_flag=True,
    help="Exit 0 even when cells failed (they stay recorded as failed): for batch jobs whose state "
    "should say that the sweep ran, not how its cells fared.",
)
@trace_option("each cell (replaces the file's `trace:`)")
@click.option("--no-progress", is_flag=True, help="No progress bar (logs, CI).")
@click.option(
    "--launcher",
    type=click.Choice(ORDER),
    help="How cells start: local processes, srun job steps (inside a Slurm allocation), nodes (one "
    "`ddlbench sweep` per node of a multi-node job) or the emulated testbed that is up; default: "
    "the one that claims the run (srun inside an allocation, nodes under a scheduler's variables, "
    "the testbed for a file's `testbed:`, else local).",
)
@click.option(
    "--server-hosts",
    type=click.Choice(["auto", "dedicated", "colocated"]),
    help="PS cells: servers on hosts without workers, on the workers' hosts, or dedicated when a host "
    "is spare (auto); replaces the sweep file's `server_hosts:`.",
)
@servers_option("; replaces the sweep file's `servers:`")
@click.option("--dtype", help="Compute dtype of every cell, fp32 or bf16; replaces the sweep file's `dtype:`.")
@stop_rule_options
@nodes_option
@history_option()
@click.pass_context
def command(
    ctx,
    sweep_file,
    options,
    strict_network,
    retry_failed,
    allow_failed_cells,
    no_progress,
    launcher,
    server_hosts,
    servers,
    dtype,
    stop,
    join_timeout_s,
    history,
    **node_flags,
):
    """Run every cell of SWEEP_FILE and print the summary.

    Exit status 0 when every cell is ok, 1 when a cell failed (0 with --allow-failed-cells), 2 on bad
    input, 128+N when signal N stopped it (finish with --resume)."""
    # lazy: what runs the command, not what declares it (docs/ARCHITECTURE.md, "Commands")
    from harness.experiment.dispatch import launcher_for, run_sweep
    from harness.experiment.sweep import load_sweep, with_overrides
    from harness.report.console import finish_run

    cfg = with_overrides(
        load_sweep(sweep_file),
        trace=ctx.meta.get(TRACE_META),
        server_hosts=server_hosts,
        servers=servers,
        dtype=dtype,
        stop=stop,
    )
    options = dataclasses.replace(
        options,
        retry_failed=retry_failed,
        progress=not no_progress,
        cold=options.cold or cfg.cold,
        launcher=launcher,
        launcher_flags={**node_flags, "join_timeout_s": join_timeout_s},
    )
    options = options.with_run_dir(cfg.name)
    try:
        chosen = launcher_for(cfg, options, f"ddlbench sweep {cfg.name} -> {options.output}")
    except Follows as node:  # a node that does not lead: it serves node 0's cells, no run directory of its own
        with signals_raise(options.output):  # interrupted, it goes on with the leader's run
            ctx.exit(node.serve(options.output, options.cold))
    run_dir = run_sweep(cfg, options, Path(sweep_file).read_text(), chosen)
    code = finish_run(run_dir, strict_network=strict_network)
    append_history(history, run_dir)
    ctx.exit(0 if code == 1 and allow_failed_cells else code)
