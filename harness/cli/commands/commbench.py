"""`ddlbench commbench`: all-reduce / push-pull time, algbw and busbw over message sizes, with an
alpha-beta fit, as tidy rows in <run>/commbench.parquet (the run: harness/commbench/driver.py)."""

from __future__ import annotations

import click

from harness.cli.options import output_option, servers_option
from harness.cli.runs_cells import RunsCells


def format_table(df) -> str:
    g = (
        df.groupby(["collective", "workers", "size_bytes"])
        .agg(
            time_s=("time_s", "median"),
            algbw=("algbw_gbit_s", "median"),
            busbw=("busbw_gbit_s", "median"),
            alpha=("fit_alpha_s", "first"),
            beta=("fit_beta_s_per_byte", "first"),
        )
        .reset_index()
    )
    lines = [f"{'collective':<10} {'N':>2} {'size':>10} {'median ms':>10} {'algbw Gb/s':>11} {'busbw Gb/s':>11}"]
    for _, r in g.iterrows():
        lines.append(
            f"{r.collective:<10} {r.workers:>2} {int(r.size_bytes):>10} {r.time_s * 1e3:>10.3f} "
            f"{r.algbw:>11.3f} {r.busbw:>11.3f}"
        )
    for (coll, n), sub in g.groupby(["collective", "workers"]):
        a, b = sub["alpha"].iloc[0], sub["beta"].iloc[0]
        lines.append(
            f"fit {coll} N={n}: alpha = {a * 1e6:.1f} us, beta = {b * 1e9:.3f} ns/byte "
            f"(= {8 / b / 1e9 if b else float('inf'):.2f} Gbit/s asymptotic)"
        )
    return "\n".join(lines)


@click.command("commbench", cls=RunsCells, go_on="measure again with --output {run_dir}")
@click.option("--workers", default=2, show_default=True, type=int, help="Ranks taking part.")
@click.option("--collective", default="allreduce", show_default=True, help="allreduce | pushpull.")
@click.option("--min-size", default="4K", show_default=True, help="Smallest message (e.g. 4K).")
@click.option("--max-size", default="256M", show_default=True, help="Largest message (e.g. 256M).")
@click.option("--reps", default=5, show_default=True, type=int, help="Timed repetitions per size.")
@click.option("--warmup", default=2, show_default=True, type=int, help="Untimed repetitions per size.")
@servers_option(" (pushpull)")
@click.option("--timeout", "timeout_s", default=900.0, show_default=True, type=float, help="Seconds.")
@click.option("--device", default="cpu", show_default=True, help="cpu | cuda.")
@click.option(
    "--testbed",
    is_flag=True,
    help="Run on the emulated testbed that is up (`ddlbench testbed up`): one rank per host first, "
    "parameter servers on spare hosts, as `ddlbench run --testbed` places them.",
)
@output_option("; measuring again into it replaces that collective's rows")
@click.option("--oversubscribe", is_flag=True, help="Allow more ranks than this box has cores.")
def command(**options):
    """Measure all-reduce or push-pull over message sizes; fit alpha and beta.

    On this box; on the emulated hosts with --testbed; inside a Slurm allocation as a job step across its
    nodes (the workers placed as a sweep's cells are). Exit status 0, 1 when the measurement failed, 2 on
    bad input, 128+N when signal N stopped it (measure again into the same --output)."""
    # lazy: what runs the command, not what declares it (docs/ARCHITECTURE.md, "Commands")
    from harness.commbench.driver import CommbenchSpec, run_commbench
    from harness.results.store import load_run

    run_dir = run_commbench(CommbenchSpec(**options))
    click.echo(format_table(load_run(run_dir).commbench))
    click.echo(f"results: {run_dir}")
