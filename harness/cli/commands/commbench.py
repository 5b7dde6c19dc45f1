"""`ddlbench commbench`: all-reduce / push-pull time, algbw and busbw over message sizes, with an
alpha-beta fit, as tidy rows in <run>/commbench.parquet."""

from __future__ import annotations

import contextlib
import math
from pathlib import Path

import click
import pandas as pd

from harness.core.atomic import write_parquet_atomic
from harness.experiment.cells import check_capacity, warn
from harness.commbench.rows import rows
from harness.commbench.run import commbench_cell, time_cell
from harness.measure.sizes import parse_size, sizes_between
from harness.core.errors import CellFailed, UserError
from harness.experiment.execute import write_environment
from harness.contracts.launcher import Launcher
from harness.experiment.options import RunOptions
from harness.experiment.run import launcher_for
from harness.results.files import check_output_dir, read_table
from harness.results.lock import run_lock
from harness.results.store import load_run, new_run_id
from harness.testbed import netns
from harness.launchers.testbed.launcher import testbed_placement_for


def run_commbench(workers: int, collective: str, min_size: str, max_size: str, reps: int, warmup: int,
                  servers: int, output: Path | None, timeout_s: float, device: str = "cpu",
                  network: str = "loopback", placement=None, oversubscribe: bool = False,
                  launcher: Launcher | None = None) -> Path:
    """Measure one collective into OUTPUT/commbench.parquet: on this box, on the testbed's hosts
    (`placement`), or through `launcher` (srun: the workers spread over the allocation's nodes as a
    sweep's cells are)."""
    if collective not in ("allreduce", "pushpull"):
        raise UserError(f"unknown collective {collective!r}: use allreduce or pushpull")
    if not (math.isfinite(timeout_s) and timeout_s > 0):
        raise UserError(f"--timeout must be a finite number of seconds > 0, got {timeout_s}; fix --timeout")
    sizes = sizes_between(parse_size(min_size), parse_size(max_size))
    nodes = placement.nodes if placement else (launcher.nodes_for(workers) if launcher and launcher.nodes_for else 1)
    cell = commbench_cell(workers, collective, sizes, reps, warmup, servers, device, network, timeout_s,
                          nodes=nodes)
    servers = cell.servers
    if launcher is None or launcher.run_module is None:
        warn(check_capacity(cell, oversubscribe))  # this box's cores
    run_dir = output or Path("results") / new_run_id(f"commbench-{collective}")
    check_output_dir(run_dir)
    d = run_dir / "commbench" / f"{collective}.w{workers}.s{servers}"
    with run_lock(run_dir):  # SIGTERM ends this process; the ranks follow (parent-death signal)
        try:
            result = time_cell(cell, d, placement, launcher)
        except CellFailed as e:
            raise UserError(f"commbench failed: {e.reason}; see logs in {d}") from None
        _store(run_dir, rows(run_dir.name, cell, result), collective, workers, device)
    return run_dir


def _store(run_dir: Path, df, collective: str, workers: int, device: str) -> None:
    """Merge these rows into RUN/commbench.parquet (replacing the same collective and worker count)."""

    target = run_dir / "commbench.parquet"
    if target.exists():
        old = read_table(target, fix="measure again into a new --output")
        old = old[~((old["collective"] == collective) & (old["workers"] == workers))]
        df = pd.concat([old, df], ignore_index=True)
    write_parquet_atomic(df, target)
    if not (run_dir / "environment.parquet").exists():
        write_environment(run_dir, run_dir.name, device)


def format_table(df) -> str:
    g = df.groupby(["collective", "workers", "size_bytes"]).agg(
        time_s=("time_s", "median"), algbw=("algbw_gbit_s", "median"), busbw=("busbw_gbit_s", "median"),
        alpha=("fit_alpha_s", "first"), beta=("fit_beta_s_per_byte", "first")).reset_index()
    lines = [f"{'collective':<10} {'N':>2} {'size':>10} {'median ms':>10} {'algbw Gb/s':>11} {'busbw Gb/s':>11}"]
    for _, r in g.iterrows():
        lines.append(f"{r.collective:<10} {r.workers:>2} {int(r.size_bytes):>10} {r.time_s * 1e3:>10.3f} "
                     f"{r.algbw:>11.3f} {r.busbw:>11.3f}")
    for (coll, n), sub in g.groupby(["collective", "workers"]):
        a, b = sub["alpha"].iloc[0], sub["beta"].iloc[0]
        lines.append(f"fit {coll} N={n}: alpha = {a * 1e6:.1f} us, beta = {b * 1e9:.3f} ns/byte "
                     f"(= {8 / b / 1e9 if b else float('inf'):.2f} Gbit/s asymptotic)")
    return "\n".join(lines)


@click.command("commbench")
@click.option("--workers", default=2, show_default=True, type=int, help="Ranks taking part.")
@click.option("--collective", default="allreduce", show_default=True, help="allreduce | pushpull.")
@click.option("--min-size", default="4K", show_default=True, help="Smallest message (e.g. 4K).")
@click.option("--max-size", default="256M", show_default=True, help="Largest message (e.g. 256M).")
@click.option("--reps", default=5, show_default=True, type=int, help="Timed repetitions per size.")
@click.option("--warmup", default=2, show_default=True, type=int, help="Untimed repetitions per size.")
@click.option("--servers", default=1, show_default=True, type=int, help="Parameter servers (pushpull).")
@click.option("--timeout", "timeout_s", default=900.0, show_default=True, type=float, help="Seconds.")
@click.option("--device", default="cpu", show_default=True, help="cpu | cuda.")
@click.option("--testbed", is_flag=True,
              help="Run on the emulated testbed that is up (`ddlbench testbed up`): one rank per host first, "
                   "parameter servers on spare hosts, as `ddlbench run --testbed` places them.")
@click.option("--output", type=click.Path(path_type=Path), help="Run directory.")
@click.option("--oversubscribe", is_flag=True, help="Allow more ranks than this box has cores.")
def command(workers, collective, min_size, max_size, reps, warmup, servers, timeout_s, device, testbed, output,
            oversubscribe):
    """Measure all-reduce or push-pull over message sizes; fit alpha and beta.

    On this box; on the emulated hosts with --testbed; inside a Slurm allocation as a job step across its
    nodes (the workers placed as a sweep's cells are)."""
    network, placement = "loopback", None
    lease = netns.lease(f"ddlbench commbench --testbed --collective {collective}") if testbed else None
    launcher = None if testbed else launcher_for(None, RunOptions())  # srun across an allocation's nodes
    with lease or contextlib.nullcontext():
        if testbed:
            network, placement = testbed_placement_for(workers, max(1, servers) if collective == "pushpull" else 0)
        run_dir = run_commbench(workers, collective, min_size, max_size, reps, warmup, servers, output,
                                timeout_s, device, network, placement, oversubscribe, launcher)
    click.echo(format_table(load_run(run_dir).commbench))
    click.echo(f"results: {run_dir}")
