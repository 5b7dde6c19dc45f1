"""The `ddlbench` command line: a thin click group; each subcommand lives in harness/cli/commands/<name>.py
and calls plain functions that the tests call too. UserError is caught once here: one line, exit 2."""

from __future__ import annotations

import importlib

import click

from harness.core.errors import UserError

# Subcommand modules in harness.cli.commands; each exposes `command` (a click command or group).
COMMANDS = [
    "list", "run", "sweep", "show", "commbench", "testbed", "profile", "predict",
    "report", "compare", "baseline", "history", "slurm", "doctor", "advise",
]


class _Group(click.Group):
    """Turns a UserError raised anywhere below, and click's own usage errors (a wrong option type, a
    missing argument, an unknown command), into one line on stderr and exit status 2. Subcommands are
    imported when asked for (`ddlbench run` imports run's module, not report's matplotlib or list's every
    scheme), so that a short command does not pay for the others' imports."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*COMMANDS, *self.commands})

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in self.commands and name in COMMANDS:
            self.add_command(importlib.import_module(f"harness.cli.commands.{name.replace('-', '_')}").command, name)
        return self.commands.get(name)

    def invoke(self, ctx: click.Context):
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


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="ddlbench")
def cli() -> None:
    """Benchmark communication methods for data-parallel distributed deep learning."""


def main() -> None:
    cli(prog_name="ddlbench")


if __name__ == "__main__":
    main()
