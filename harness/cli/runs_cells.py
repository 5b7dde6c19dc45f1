"""The one way a command that runs cells ends (docs/ARCHITECTURE.md, "Commands"): `run`, `sweep`, `advise`,
`commbench`, `profile`, `testbed measure` and `doctor` are `RunsCells` commands.

    @click.command("advise", cls=RunsCells, go_on="go on with the same command and --resume --output {run_dir}")

A run that cannot go on (RunFailed: the one cell it measures failed, a node was lost) and a cell failure that
reaches the command (CellFailed) are one line, exit status 1. SIGTERM and SIGINT end every command one way, in
the group (harness/cli/main.py): they raise Interrupted (harness/core/errors.py), so the running cell's ranks
are stopped by the `finally` blocks below it and the cell is recorded as interrupted; for a RunsCells command
the group then prints what its run directory holds (`show_run`) and one line on stderr (what was stopped, how
to go on: `go_on`), and exits 128+N, no traceback. Bad input (UserError) is the group's too."""

from __future__ import annotations

import click

from harness.core.errors import CellFailed, RunFailed

FINISH = "finish with --resume --output {run_dir}"
"""How `run` and `sweep` go on after an interruption."""


class RunsCells(click.Command):
    """A click command that runs cells (or a cell's ranks): failed runs and failed cells end it through this
    one path; how it goes on after a signal is declared here and said by the group."""

    def __init__(self, *args, go_on: str = "run it again", show_run: bool = True, **kwargs):
        super().__init__(*args, **kwargs)
        self.go_on = go_on
        """How to go on after an interruption (`{run_dir}`: the run directory the signal stopped)."""
        self.show_run = show_run
        """Print what the interrupted run directory holds (its summary table) before the line."""

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except RunFailed as e:
            click.echo(f"error: {e}", err=True)
            ctx.exit(e.exit_code)
        except CellFailed as e:  # the ranks' last lines are the only account of a cell kept nowhere else
            click.echo(f"error: {e.reason}" + (f"\n{e.log_tail}" if e.log_tail else ""), err=True)
            ctx.exit(RunFailed.exit_code)
