"""The one way a command that runs cells ends (docs/ARCHITECTURE.md, "Commands"): `run`, `sweep`, `advise`,
`commbench`, `profile`, `testbed measure` and `doctor` are `RunsCells` commands.

    @click.command("advise", cls=RunsCells, go_on="go on with the same command and --resume --output {run_dir}")

While such a command runs, SIGTERM and SIGINT raise Interrupted (harness/core/errors.py), so the running
cell's ranks are stopped by the `finally` blocks below it and the cell is recorded as interrupted; the
command then prints what its run directory holds and one line on stderr (what was stopped, how to go on),
and exits 128+N, no traceback. A run that cannot go on (RunFailed: the one cell it measures failed, a node
was lost) and a cell failure that reaches the command (CellFailed) are one line, exit status 1. Bad input
(UserError) is the group's, for every command (harness/cli/main.py)."""

from __future__ import annotations

import click

from harness.core.errors import CellFailed, Interrupted, RunFailed, signals_raise

FINISH = "finish with --resume --output {run_dir}"
"""How `run` and `sweep` go on after an interruption."""


class RunsCells(click.Command):
    """A click command that runs cells (or a cell's ranks): signals, failed runs and failed cells end it
    through this one path."""

    def __init__(self, *args, go_on: str = "run it again", show_run: bool = True, **kwargs):
        super().__init__(*args, **kwargs)
        self.go_on = go_on
        """How to go on after an interruption (`{run_dir}`: the run directory the signal stopped)."""
        self.show_run = show_run
        """Print what the interrupted run directory holds (its summary table) before the line."""

    def invoke(self, ctx: click.Context):
        with signals_raise():  # reported inside: a second signal is ignored while the first is reported
            try:
                return super().invoke(ctx)
            except Interrupted as e:
                from harness.report.console import finish_interrupted  # lazy: the report's tables (pandas)

                ctx.exit(finish_interrupted(e, self.go_on, self.show_run))
            except RunFailed as e:
                click.echo(f"error: {e}", err=True)
                ctx.exit(e.exit_code)
            except CellFailed as e:  # the ranks' last lines are the only account of a cell kept nowhere else
                click.echo(f"error: {e.reason}" + (f"\n{e.log_tail}" if e.log_tail else ""), err=True)
                ctx.exit(RunFailed.exit_code)
