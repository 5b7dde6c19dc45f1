"""`ddlbench report RUN [RUN ...] -o reports/NAME`: figures, report.md and a self-contained report.html.

    ddlbench report results/<run-id> -o reports/quick
    ddlbench report results/eth-10g results/ipoib results/ib -o reports/networks   # runs merge
    ddlbench report results/<run-id> predicted.parquet comm.parquet -o reports/model

Each RUN is a run directory, a run id under results/, a stored baseline name, or a loose Parquet file:
summary-shaped rows (e.g. `ddlbench predict -o FILE`, source=predicted) or a commbench table.
"""

from __future__ import annotations

from pathlib import Path

import click

from harness.core.errors import UserError


def load_input(ref: str):
    """A run (directory, id, baseline name) or a loose summary/commbench Parquet file -> RunTables."""

    # lazy: what runs the command, not what declares it (docs/ARCHITECTURE.md, "Commands")
    import pandas as pd

    from harness.gate.baselines import load_stored, resolve
    from harness.results.files import read_table
    from harness.results.store import RunTables

    p = Path(ref)
    if p.is_file():
        if p.suffix != ".parquet":
            raise UserError(
                f"{ref} is a file but not .parquet: give a run directory, or a summary or commbench Parquet file"
            )
        df = read_table(p)
        empty = pd.DataFrame()
        if "collective" in df and "busbw_gbit_s" in df:
            return RunTables(path=p, raw=empty, summary=empty, environment=empty, commbench=df)
        if {"workload", "scheme", "workers", "throughput_median"} <= set(df.columns):
            if "status" not in df:
                df = df.assign(status="ok")
            return RunTables(path=p, raw=empty, summary=df, environment=empty, commbench=empty)
        raise UserError(
            f"{ref} is neither summary-shaped (workload, scheme, workers, throughput_median) "
            f"nor a commbench table (collective, size_bytes, busbw_gbit_s)"
        )
    return load_stored(resolve(ref))


@click.command("report")
@click.argument("runs", nargs=-1, required=True)
@click.option(
    "-o",
    "--output",
    type=click.Path(path_type=Path),
    required=True,
    help="Report directory, e.g. reports/NAME (created).",
)
@click.option("--title", default=None, help="Page title (default: the run names).")
@click.option(
    "--timeline",
    "timelines",
    multiple=True,
    metavar="CELL_ID",
    help="Draw the timeline of this traced cell (repeatable; `all`: every traced cell; default: the "
    "first few cells that have a trace.json, from `run --trace`).",
)
@click.option("--dpi", type=click.IntRange(50, 300), default=100, show_default=True, help="PNG resolution.")
def command(runs, output, title, timelines, dpi):
    """Write figures, report.md and report.html for RUNS (merged; e.g. one run per network).

    A RUN may also be a Parquet file of predicted rows or a commbench table."""

    # lazy: what runs the command, not what declares it (docs/ARCHITECTURE.md, "Commands")
    from harness.report.render import write_report
    from harness.results.files import check_output_dir

    check_output_dir(output, "-o/--output")
    out = write_report([load_input(r) for r in runs], output, title=title, dpi=dpi, timelines=timelines)
    pngs = sorted(k for k in out if k.endswith(".png"))
    click.echo(f"wrote {out['md']} and {out['html']} ({len(pngs)} figures: {', '.join(pngs)})")
