"""`ddlbench history`: every cell's history across commits (harness/history/, docs/ARCHITECTURE.md, "History").

    ddlbench history add results/<run-id> --history history/     # one row per cell and run, appended
    ddlbench history changes --history history/                  # change points, open ones first
    ddlbench history report --history history/ -o history.html   # the page: every cell over commits
    ddlbench history alarms --spread 0.02 -o reports/history      # false alarms and detection, measured

The gate against the history is `ddlbench compare --history DIR CURRENT...` (harness/cli/commands/compare.py).
"""

from __future__ import annotations

from pathlib import Path

import click

from harness.cli.options import history_option


@click.group("history")
def command():
    """Every cell's history across commits: add runs, find change points, show them."""


@command.command("add")
@click.argument("runs", nargs=-1, required=True)
@history_option(required=True, more="")
@click.option(
    "--repo",
    type=click.Path(file_okay=False),
    default=".",
    show_default=True,
    help="The git checkout whose first-parent history orders the runs' commits.",
)
def add_command(runs, history, repo):
    """Append the cells of RUN... (run directories or stored baselines) to the history folder."""
    # lazy: what runs the command, not what declares it (docs/ARCHITECTURE.md, "Commands")
    from harness.history.record import add_runs

    for line in add_runs(history, runs, repo):
        click.echo(line)


@command.command("changes")
@history_option(required=True, more="")
@click.option(
    "--all",
    "show_all",
    is_flag=True,
    help="Also list triaged changes and environment changes, and every series' detectable step.",
)
@click.option(
    "--json",
    "json_out",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Also write the changes as JSON to this file.",
)
def changes_command(history, show_all, json_out):
    """List the change points of every cell's series (open ones first) with the commits to bisect, and what
    each series is blind to: the smallest slowdown the detector would find at its noise and length."""
    # lazy: what runs the command, not what declares it (docs/ARCHITECTURE.md, "Commands")
    from harness.core.atomic import write_text_atomic
    from harness.history.blind import series_blind
    from harness.history.markdown import blind_markdown, changes_markdown
    from harness.history.scan import scan

    found = scan(history)
    for line in found.problems:
        click.echo(f"warning: {line}", err=True)
    table = found.changes if show_all else found.changes[found.changes["state"] == "open"]
    click.echo(changes_markdown(table, len(found.series), len(found.rows)))
    click.echo(blind_markdown(series_blind(history, found), show_all))
    if json_out:
        write_text_atomic(json_out, table.to_json(orient="records", indent=1))


@command.command("report")
@history_option(required=True, more="")
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    required=True,
    help="The HTML page to write (self-contained: plots inline).",
)
def report_command(history, output):
    """Write a self-contained HTML page: each cell's throughput over commits, changes marked."""
    # lazy: what runs the command, not what declares it (docs/ARCHITECTURE.md, "Commands")
    from harness.report.history_page import write_history_page

    click.echo(f"wrote {write_history_page(history, output)}")


def _alarms_options(f):
    """The options of `history alarms` and of its old name, `history calibrate`."""
    for option in reversed(
        (
            click.option(
                "--spread",
                type=click.FloatRange(min=0.0, min_open=True),
                help="Run-to-run spread (CV of run medians) to simulate, e.g. 0.02; default: measured from "
                "--baseline or --history.",
            ),
            click.option("--baseline", help="A stored baseline with several rounds: its cells' run-to-run spread."),
            history_option(more=": measure the spread of its series"),
            click.option(
                "--series", type=click.IntRange(min=10), default=1000, show_default=True, help="Series per case."
            ),
            click.option(
                "--points", type=click.IntRange(min=20), default=100, show_default=True, help="Runs per series."
            ),
            click.option(
                "-o",
                "--output",
                type=click.Path(file_okay=False, path_type=Path),
                default=Path("reports/history"),
                show_default=True,
                help="Folder for alarms.md and alarms.json.",
            ),
        )
    ):
        f = option(f)
    return f


def _alarms(spread, baseline, history, series, points, output, stem: str) -> None:
    # lazy: what runs the command, not what declares it (docs/ARCHITECTURE.md, "Commands")
    from harness.history.alarms import alarm_rates, machine_spread, write_alarms

    noise, source = machine_spread(spread, baseline, history)
    result = alarm_rates(noise, series=series, points=points)
    md = write_alarms(result, output, source, stem)
    click.echo(md)


@command.command("alarms")
@_alarms_options
def alarms_command(spread, baseline, history, series, points, output):
    """Measure the detector's false alarms and detection rates on synthetic series at this machine's noise."""
    _alarms(spread, baseline, history, series, points, output, "alarms")


@command.command("calibrate", hidden=True)
@_alarms_options
def calibrate_command(spread, baseline, history, series, points, output):
    """The old name of `history alarms` (users' CI calls it): says so on stderr, then does the same, into
    calibrate.md and calibrate.json as it always did. "calibrate" is the stack fit (`predict --calibrate`)."""
    click.echo("ddlbench history calibrate is now named ddlbench history alarms", err=True)
    _alarms(spread, baseline, history, series, points, output, "calibrate")
