"""`ddlbench run`: one cell. On one box it spawns the worker processes itself; under torchrun (or
srun) it is itself one of the workers and rank 0 writes the tables."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import click

from harness.cell import CellSpec, resolve
from harness.errors import UserError


def parse_knobs(pairs: tuple[str, ...]) -> dict:
    import yaml

    out = {}
    for pair in pairs:
        if "=" not in pair:
            raise UserError(f"--knob {pair!r} is not NAME=VALUE; write e.g. --knob bucket_cap_mb=25")
        k, v = pair.split("=", 1)
        out[k.strip()] = yaml.safe_load(v)
    return out


def run_cell(cell: CellSpec, output: Path | None, baseline: bool = False, launcher=None) -> Path:
    """Resolve, run (plus the local baseline if asked) and record; returns the run directory.
    `launcher` as in run_cells (default: spawn the ranks on this box)."""
    from harness.execute import run_cells
    from harness.results.store import new_run_id

    cell = resolve(cell)
    run_id = new_run_id(f"{cell.workload}-{cell.scheme}")
    run_dir = output or Path("results") / run_id
    run_id = run_dir.name
    cells = [cell]
    if baseline and cell.scheme != "local":
        cells.insert(0, resolve(cell.with_(scheme="local", workers=1, servers=0, nodes=1, knobs={},
                                           backend="torch")))
    run_cells(cells, run_dir, run_id, resume=True, launcher=launcher)
    return run_dir


def run_under_launcher(cell: CellSpec, output: Path) -> None:
    """Started by torchrun/srun: be one rank; rank 0 records the cell."""
    import json

    from harness.execute import record_result, write_environment
    from harness.launch.env import from_environ
    from harness.results.store import cell_dir
    from harness.worker import run_worker

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
@click.option("--workload", required=True, help="Workload name (see `ddlbench list`).")
@click.option("--scheme", default="ddp", show_default=True, help="Scheme name.")
@click.option("--backend", default="torch", show_default=True, help="Backend name.")
@click.option("--workers", default=2, show_default=True, type=int, help="Worker processes.")
@click.option("--servers", default=0, type=int, help="Parameter servers (PS schemes; 0 = one).")
@click.option("--batch", type=int, help="Per-worker batch (default: the workload's).")
@click.option("--seq-len", type=int, help="Sequence length (default: the workload's).")
@click.option("--warmup", default=10, show_default=True, type=int, help="Discarded iterations.")
@click.option("--iters", default=30, show_default=True, type=int, help="Measured iterations.")
@click.option("--timeout", "timeout_s", default=600.0, show_default=True, type=float,
              help="Cell time limit, seconds.")
@click.option("--device", default="auto", show_default=True, help="cpu | cuda | auto.")
@click.option("--threads", default=1, show_default=True, type=int, help="torch threads per worker (CPU).")
@click.option("--knob", "knobs", multiple=True, help="Scheme knob NAME=VALUE (repeatable).")
@click.option("--network", default="loopback", show_default=True, help="Network label for the row.")
@click.option("--testbed", is_flag=True,
              help="Run on the emulated testbed that is up (`ddlbench testbed up`); workers spread "
                   "over its hosts.")
@click.option("--baseline/--no-baseline", default=False,
              help="Also measure the 1-worker local baseline (speed-up, efficiency).")
@click.option("--output", type=click.Path(file_okay=False, path_type=Path),
              help="Run directory (default results/<run-id>).")
def command(workload, scheme, backend, workers, servers, batch, seq_len, warmup, iters, timeout_s, device,
            threads, knobs, network, testbed, baseline, output):
    """Run one benchmark cell and print its summary."""
    cell = CellSpec(workload=workload, scheme=scheme, backend=backend, workers=workers, servers=servers,
                    batch=batch, seq_len=seq_len, warmup=warmup, iters=iters, timeout_s=timeout_s,
                    device=device, threads=threads, knobs=parse_knobs(knobs), network=network)
    if "TORCHELASTIC_RUN_ID" in os.environ or os.environ.get("DDLBENCH_IN_LAUNCHER") == "1":
        if output is None:
            raise UserError("under torchrun/srun every rank must agree on the run directory: pass --output")
        run_under_launcher(cell, output)
        return
    from harness.testbed import netns

    launcher = None
    with netns.lease(f"ddlbench run {cell.workload} {cell.scheme} --testbed") if testbed else contextlib.nullcontext():
        if testbed:
            from harness.testbed.sweep import on_testbed

            cell, launcher = on_testbed(cell)
        run_dir = run_cell(cell, output, baseline, launcher)
    from harness.commands.show import print_summary
    from harness.results.store import load_run

    print_summary(load_run(run_dir).summary, title=str(run_dir))
