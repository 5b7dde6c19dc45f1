"""`ddlbench sweep FILE.yaml`: a matrix of cells, with a progress bar, resumable.

Exit status 0 when every cell is ok, 1 when a cell failed (the summary is still printed and written),
2 on bad input, 128+N when signal N stopped the driver (finish with --resume)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import click

from harness.atomic import write_text_atomic
from harness.cell import check_capacity, warn
from harness.commands.run import TRACE_META, trace_option
from harness.commands.show import finish_run
from harness.errors import UserError
from harness.execute import Interrupted, run_cells
from harness.launch.srun import choose_launcher
from harness.results.files import check_output_dir, unwritable
from harness.results.lock import run_lock
from harness.results.store import new_run_id, prepare_run
from harness.sweep import expand, load_sweep
from harness.testbed.sweep import run_on_testbed


def run_sweep(path: str | Path, output: Path | None = None, resume: bool = False,
              progress: bool = True, launcher: str | None = None, retry_failed: bool = False, *,
              overwrite: bool = False, oversubscribe: bool = False, server_hosts: str | None = None,
              trace: int | None = None, dtype: str | None = None) -> Path:
    """Run every cell of the sweep file at `path` into `output` (default results/<run-id>); returns the
    run directory. An existing run there is refused unless `resume` or `overwrite`; `server_hosts`
    replaces the file's `server_hosts:`."""
    cfg = load_sweep(path)
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
        with run_lock(run_dir):
            prepare_run(run_dir, resume, overwrite)
            return run_on_testbed(cfg, run_dir, resume, progress, retry_failed)
    launch = choose_launcher(launcher)  # srun inside a Slurm allocation, else local
    cells = expand(cfg, nodes_for=launch.nodes_for)
    for c in cells if launch.check else ():
        launch.check(c)  # e.g. dedicated server hosts without a spare host: refused before anything runs
    for note in dict.fromkeys(check_capacity(c, oversubscribe or cfg.oversubscribe) for c in cells):
        warn(note)
    with run_lock(run_dir):
        prepare_run(run_dir, resume, overwrite)
        try:
            write_text_atomic(run_dir / "sweep.yaml", Path(path).read_text())
        except OSError as e:
            raise unwritable(e, f"run directory {run_dir}", "choose a writable --output") from None
        run_cells(cells, run_dir, run_dir.name, resume=resume, progress=progress, launcher=launch.launch,
                  env_extra=launch.env_extra or None, retry_failed=retry_failed)
    return run_dir


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
@click.option("--launcher", type=click.Choice(["local", "srun"]),
              help="How cells start: srun steps (default inside a Slurm allocation) or local processes.")
@click.option("--server-hosts", type=click.Choice(["auto", "dedicated", "colocated"]),
              help="PS cells: servers on hosts without workers, on the workers' hosts, or dedicated when a host "
                   "is spare (auto); replaces the sweep file's `server_hosts:`.")
@click.option("--dtype", help="Compute dtype of every cell, fp32 or bf16; replaces the sweep file's `dtype:`.")
@click.option("--strict-network", is_flag=True,
              help="Exit 1 when a multi-node cell's traffic did not go mainly through the interface its network "
                   "profile names (summary column net_check).")
@click.pass_context
def command(ctx, sweep_file, output, resume, overwrite, retry_failed, oversubscribe, allow_failed_cells,
            no_progress, launcher, strict_network, server_hosts, dtype):
    """Run every cell of SWEEP_FILE and print the summary.

    Exit status 0 when every cell is ok, 1 when a cell failed (0 with --allow-failed-cells), 2 on bad
    input, 128+N when signal N stopped it (finish with --resume)."""
    if output is None and not resume:
        output = Path("results") / new_run_id(load_sweep(sweep_file).name)
    try:
        run_dir = run_sweep(sweep_file, output, resume, progress=not no_progress, launcher=launcher,
                            trace=ctx.meta.get(TRACE_META),
                            retry_failed=retry_failed, overwrite=overwrite, oversubscribe=oversubscribe,
                            server_hosts=server_hosts, dtype=dtype)
    except Interrupted as e:
        ctx.exit(finish_run(output, interrupted=e))
    code = finish_run(run_dir, strict_network=strict_network)
    ctx.exit(0 if code == 1 and allow_failed_cells else code)
