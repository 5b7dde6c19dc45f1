"""A run's summary on the terminal (docs/ARCHITECTURE.md, "Reports"): the table `ddlbench run`, `sweep`, `show`
and `slurm` print, its warnings, and the exit status a CI job can trust."""

from __future__ import annotations

from pathlib import Path

import click
import pandas as pd
from rich.console import Console
from rich.table import Table

from harness.core.errors import Interrupted
from harness.report.tables import summary_table
from harness.results.machine_load import busy_runs
from harness.results.store import load_run
from harness.results.summarize import short_of_precision


def print_summary(summary: pd.DataFrame, title: str = "", env: pd.DataFrame | None = None) -> None:
    """The report's laptop-wide summary (harness/report/tables.summary_table: constant columns in the
    caption, overlap marked where ranks take every core), then the failed cells' reasons."""
    df, caption = summary_table(summary, env)
    table = Table(title=title or None, caption=caption, caption_justify="left")
    for col in df.columns:
        table.add_column(str(col))
    for row in df.itertuples(index=False):
        table.add_row(*[str(v) for v in row])
    Console(width=130).print(table)
    failed = summary[summary["status"] != "ok"]
    for _, r in failed.iterrows():
        click.echo(f"failed {r['cell_id']}: {r['reason']}")
    for line in network_warnings(summary):
        click.echo(f"warning: {line}", err=True)
    for line in short_of_precision(summary):  # the stop rule (README, "Measuring")
        click.echo(f"warning: {line}", err=True)


def network_warnings(summary: pd.DataFrame) -> list[str]:
    """One line per multi-node cell whose traffic did not go mainly through the interface it named
    (harness/results/netcheck.py)."""
    if "net_check" not in summary:
        return []
    bad = summary[summary["net_check"] == "wrong-interface"]
    return [
        f"{r['cell_id']}: its ranks named {r['iface'] or '(nothing)'} but {r['net_main_iface']} carried most "
        f"bytes ({100 * (r['net_iface_share'] if r['net_iface_share'] == r['net_iface_share'] else 0):.0f} % "
        f"through the named one): the row's network {r['network']!r} is not what was measured"
        for _, r in bad.iterrows()
    ]


def _print_run(run_dir: Path | None) -> pd.DataFrame:
    """The run's summary table, printed when it has one; returned (empty when it has none)."""
    if run_dir is None or not (Path(run_dir) / "summary.parquet").exists():
        return pd.DataFrame()
    tables = load_run(run_dir)
    print_summary(tables.summary, title=str(run_dir), env=tables.environment)
    return tables.summary


def finish_interrupted(e: Interrupted, go_on: str, show_run: bool = True) -> int:
    """After a command that runs cells was stopped by a signal: what its run directory holds so far (with
    `show_run`), then one line on stderr saying what was stopped and how to go on (`go_on`, where
    `{run_dir}` stands for the run directory); returns the exit status, 128+N for signal N."""
    if show_run:
        _print_run(e.run_dir)
    click.echo(f"error: {e.line(go_on)}", err=True)
    return e.exit_code


def finish_run(run_dir: Path | None, strict_network: bool = False) -> int:
    """After `run` or `sweep`: print the run's summary and return the exit status a CI job can trust:
    0 every cell ok, 1 a cell failed (or, with `strict_network`, a multi-node cell's traffic went through
    another interface than it named). An interrupted run ends through `finish_interrupted` instead."""
    summary = _print_run(run_dir)
    click.echo(f"results: {run_dir}")
    if run_dir is not None and (Path(run_dir) / "environment.parquet").exists():
        for line in busy_runs(load_run(run_dir).environment):  # docs/ARCHITECTURE.md, "Measurement hygiene"
            click.echo(f"warning: {line}", err=True)
    failed = int((summary["status"] != "ok").sum()) if "status" in summary else 0
    if failed:
        click.echo(f"{failed} cell(s) failed (exit status 1); see their reasons above", err=True)
    wrong = len(network_warnings(summary)) if strict_network else 0
    if wrong:
        click.echo(f"{wrong} cell(s) failed the network check (--strict-network, exit status 1)", err=True)
    return 1 if failed or wrong else 0
