"""`ddlbench show RUN`: the summary of a run as a table."""

from __future__ import annotations

from pathlib import Path

import click

from harness.core.errors import UserError


@click.command("show")
@click.argument("run")
@click.option("--csv", "csv_path", type=click.Path(path_type=Path), help="Also write the summary as CSV.")
def command(run: str, csv_path: Path | None) -> None:
    """Print the summary of RUN (a run directory or a run id under results/)."""
    # lazy: what runs the command, not what declares it (docs/ARCHITECTURE.md, "Commands")
    import pandas as pd

    from harness.core.atomic import write_text_atomic
    from harness.report.console import print_summary
    from harness.results.files import check_output_file
    from harness.results.machine_load import busy_runs
    from harness.results.store import load_run

    if csv_path:
        check_output_file(csv_path, "--csv")
    t = load_run(run)
    if t.summary.empty:
        raise UserError(
            f"run {t.path} holds no cells, only a commbench table: see it with `ddlbench report {t.path} -o DIR`"
        )
    unit = ", ".join(sorted(set(t.summary.get("sample_unit", pd.Series(dtype=str)).dropna()))) or "samples"
    print_summary(t.summary, title=f"{t.path} (X in {unit}/s)", env=t.environment)
    for line in busy_runs(t.environment):
        click.echo(f"warning: {line}", err=True)
    if csv_path:
        write_text_atomic(csv_path, t.summary.to_csv(index=False))
        click.echo(f"wrote {csv_path}")
