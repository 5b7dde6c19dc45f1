"""`ddlbench show RUN`: the summary of a run as a table."""

from __future__ import annotations

import click
import pandas as pd

COLUMNS = [
    ("workload", "workload", "{}"), ("scheme", "scheme", "{}"), ("backend", "backend", "{}"),
    ("workers", "N", "{}"), ("network", "network", "{}"), ("status", "status", "{}"),
    ("throughput_median", "X median/s", "{:.1f}"), ("throughput_ci95_low", "X mean 95% CI lo", "{:.1f}"),
    ("throughput_ci95_high", "hi", "{:.1f}"), ("iter_s_median", "iter ms", "{:.1f}"),
    ("iter_s_cv", "CV", "{:.3f}"), ("speedup", "speed-up", "{:.2f}"),
    ("scaling_efficiency", "eff.", "{:.2f}"), ("exposed_comm_s", "exposed comm ms", "{:.1f}"),
    ("overlap_ratio", "overlap", "{:.2f}"),
]
_MS = {"iter_s_median", "exposed_comm_s"}


def columns_for(summary: pd.DataFrame) -> list[tuple[str, str, str]]:
    """COLUMNS, with `network` only when the run measured on more than the loopback default."""
    nets = set(summary["network"].dropna()) if "network" in summary else set()
    return [c for c in COLUMNS if c[0] != "network" or nets - {"loopback"}]


def format_summary(summary: pd.DataFrame) -> list[list[str]]:
    rows = []
    cols = columns_for(summary)
    for _, r in summary.iterrows():
        out = []
        for col, _, fmt in cols:
            v = r.get(col)
            if v is None or (isinstance(v, float) and pd.isna(v)):
                out.append("-")
                continue
            out.append(fmt.format(v * 1000 if col in _MS else v))
        rows.append(out)
    return rows


def print_summary(summary: pd.DataFrame, title: str = "") -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title or None)
    for _, head, _ in columns_for(summary):
        table.add_column(head)
    keys = [k for k in ("workload", "network", "scheme", "backend", "workers") if k in summary]
    for row in format_summary(summary.sort_values(keys)):
        table.add_row(*row)
    Console(width=200).print(table)
    failed = summary[summary["status"] != "ok"]
    for _, r in failed.iterrows():
        click.echo(f"failed {r['cell_id']}: {r['reason']}")


@click.command("show")
@click.argument("run")
@click.option("--csv", "csv_path", type=click.Path(dir_okay=False), help="Also write the summary as CSV.")
def command(run: str, csv_path: str | None) -> None:
    """Print the summary of RUN (a run directory or a run id under results/)."""
    from harness.results.store import load_run

    t = load_run(run)
    unit = ", ".join(sorted(set(t.summary["sample_unit"].dropna()))) or "samples"
    print_summary(t.summary, title=f"{t.path} (X in {unit}/s; CI = 95% CI of the mean)")
    if csv_path:
        t.summary.to_csv(csv_path, index=False)
        click.echo(f"wrote {csv_path}")
