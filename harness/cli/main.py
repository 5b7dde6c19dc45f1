"""The `ddlbench` command line: a thin click group; each subcommand lives in harness/cli/commands/<name>.py
and calls plain functions that the tests call too. UserError is caught once here: one line, exit 2; and so is
SIGINT or SIGTERM, for every command: one line saying what was stopped and how to go on, exit 128+N
(docs/ARCHITECTURE.md, "Commands")."""

from __future__ import annotations

import importlib
import signal

import click

from harness.cli.runs_cells import RunsCells
from harness.core.errors import Interrupted, UserError, signals_raise

# Subcommand modules in harness.cli.commands; each exposes `command` (a click command or group).
COMMANDS = [
    "list",
    "run",
    "sweep",
    "show",
    "commbench",
    "testbed",
    "profile",
    "predict",
    "report",
    "compare",
    "baseline",
    "history",
    "slurm",
    "doctor",
    "advise",
]


RUNNING = "ddlbench.running"
"""Key of `ctx.meta` (shared by every context of the command line): (command path, command) of the command
the line runs, e.g. ("ddlbench history changes", its click command)."""


class _Group(click.Group):
    """Turns a UserError raised anywhere below, and click's own usage errors (a wrong option type, a
    missing argument, an unknown command), into one line on stderr and exit status 2; and SIGINT or SIGTERM
    (Ctrl-C, `timeout`, a CI cancel), whatever the command, into one line and exit status 128+N, never click's
    `Aborted!` and exit 1 (which `compare` uses for "worse"). Subcommands are imported when asked for
    (`ddlbench run` imports run's module, not report's matplotlib or list's every scheme), so that a short
    command does not pay for the others' imports."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*COMMANDS, *self.commands})

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in self.commands and name in COMMANDS:
            self.add_command(importlib.import_module(f"harness.cli.commands.{name.replace('-', '_')}").command, name)
        return self.commands.get(name)

    def resolve_command(self, ctx: click.Context, args: list[str]):
        """click's, remembering in `ctx.meta` which command (through a group: which of its subcommands) runs."""
        ctx.meta[RUNNING] = (" ".join([ctx.command_path, *args[:1]]), None)  # while its module is imported
        name, cmd, rest = super().resolve_command(ctx, args)
        path, leaf, more = [ctx.command_path, name], cmd, list(rest)
        while isinstance(leaf, click.Group) and more and leaf.get_command(ctx, more[0]) is not None:
            path.append(more[0])
            leaf = leaf.get_command(ctx, more.pop(0))
        ctx.meta[RUNNING] = (" ".join(path), leaf)
        return name, cmd, rest

    def invoke(self, ctx: click.Context):
        with signals_raise():  # reported inside: a second signal is ignored while the first is reported
            try:
                return super().invoke(ctx)
            except UserError as e:
                click.echo(f"error: {e}", err=True)
                ctx.exit(2)
            except click.UsageError as e:
                where = (e.ctx or ctx).command_path
                message = " ".join(e.format_message().split()).rstrip(".")
                click.echo(f"error: {message}; see `{where} --help`", err=True)
                ctx.exit(2)
            except KeyboardInterrupt:  # SIGINT after code below put Python's own handler back
                ctx.exit(_interrupted(ctx, Interrupted(signal.SIGINT)))
            except Interrupted as e:
                ctx.exit(_interrupted(ctx, e))


def _interrupted(ctx: click.Context, e: Interrupted) -> int:
    """The one line of a command stopped by a signal (a RunsCells command: its run so far first, and its own
    words for how to go on); returns the exit status, 128+N."""
    path, command = ctx.meta.get(RUNNING, (ctx.command_path, None))
    e.stopped = e.stopped or f"`{path}` stopped before it finished"
    if isinstance(command, RunsCells):
        from harness.report.console import finish_interrupted  # lazy: the report's tables (pandas)

        return finish_interrupted(e, command.go_on, command.show_run)
    click.echo(f"error: {e.line('run it again')}", err=True)
    return e.exit_code


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="ddlbench")
def cli() -> None:
    """Benchmark communication methods for data-parallel distributed deep learning."""


def main() -> None:
    cli(prog_name="ddlbench")


if __name__ == "__main__":
    main()
