"""Options more than one command takes (docs/ARCHITECTURE.md, "Commands"): the `ddlbench run` options that set
a cell, made from CellSpec's declarations (harness/contracts/cell.py: one option per field, its type and
default from the field, its help from the field's docstring; only an option's spelling and the few defaults
`run` chooses differently are written here), `--servers` (one meaning in every command), `--knob`, `--trace`,
the run options `run` and `sweep` share (`run_options`: one RunOptions), `--output` (a run directory), and the
node-list launcher's flags."""

from __future__ import annotations

import dataclasses
import functools
import types
import typing
from pathlib import Path

import click

from harness.contracts.cell import DIST_BACKENDS, SERVER_HOSTS, CellSettings, CellSpec, parse_precision
from harness.core.errors import UserError
from harness.core.fields import field_docs
from harness.experiment.options import RunOptions
from harness.results.paths import RESULTS_ROOT

RUN_FIELDS = (
    "workload",
    "scheme",
    "backend",
    "workers",
    "servers",
    *(f.name for f in dataclasses.fields(CellSettings)),
    "dtype",
    "server_hosts",
)
"""The CellSpec fields `ddlbench run` takes as options (knobs come as --knob NAME=VALUE)."""
SPELLING = {"timeout_s": "--timeout", "max_time_s": "--max-time"}
"""Options not spelt --<field-name>."""
RUN_DEFAULTS = {"scheme": "ddp", "workers": 2}
"""Defaults of `run` that differ from the cell's: a single command should compare something."""
CHOICES = {"server_hosts": SERVER_HOSTS, "dist_backend": DIST_BACKENDS}


class Precision(click.ParamType):
    """`--precision P`: a fraction (0.02) or a percentage ("2%"), as a fraction; anything else is one line,
    exit 2 (harness/contracts/cell.parse_precision)."""

    name = "P"

    def convert(self, value, param, ctx):
        return value if value is None else parse_precision(value)


TYPES = {"precision": Precision()}
"""Options whose values are read by a parser of their own, not by their field's annotation."""
SERVERS_HELP = (
    "Parameter-server processes of a PS scheme's cell, at least 1 (default: one per worker node, as the "
    "study ran BytePS)"
)
"""What `--servers` means in every command (README, "Parameter servers")."""


def servers_option(more: str = ""):
    """`--servers N`, one meaning and one default in `run`, `sweep`, `predict`, `advise` and `commbench`: N >= 1
    parameter-server processes of a PS cell; not given, one per worker node, handed on as 0
    (harness/contracts/cell.per_worker_node). 0 is refused in one line, as any value below the range."""
    return click.option(
        "--servers",
        type=click.IntRange(min=1),
        default=None,
        callback=lambda _ctx, _param, value: value or 0,
        help=f"{SERVERS_HELP}{more}.",
    )


def _kind(hint):
    """The click type of a field's annotation (`int | None` -> int)."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        hint = next(a for a in typing.get_args(hint) if a is not type(None))
    return hint


def cell_options(command):
    """Decorate a click command with one option per RUN_FIELDS field, passed as that field's name."""
    docs, hints = field_docs(CellSpec), typing.get_type_hints(CellSpec)
    declared = {f.name: f.default for f in dataclasses.fields(CellSpec)}
    for name in reversed(RUN_FIELDS):
        if name == "servers":  # the shared option, as every command takes it
            command = servers_option()(command)
            continue
        default = RUN_DEFAULTS.get(name, declared[name])
        required = default is dataclasses.MISSING
        kind = click.Choice(CHOICES[name]) if name in CHOICES else TYPES.get(name) or _kind(hints[name])
        given = {"required": True} if required else {"default": default, "show_default": default is not None}
        command = click.option(
            SPELLING.get(name, "--" + name.replace("_", "-")), name, type=kind, help=docs[name], **given
        )(command)
    return command


STOP_OPTIONS = ("precision", "min_iters", "max_iters", "max_time_s")
"""The stop rule's options (harness/contracts/cell.STOP_RULE), as `run` has them, for `sweep`."""


def stop_rule_options(command):
    """Decorate `sweep` with `run`'s stop-rule options (--precision, --min-iters, --max-iters, --max-time),
    handed to the command as `stop`: {field: value} of those given, each replacing the sweep file's."""
    docs, hints = field_docs(CellSpec), typing.get_type_hints(CellSpec)

    @functools.wraps(command)
    def with_stop(*args, **kwargs):
        stop = {name: kwargs.pop(name) for name in STOP_OPTIONS}
        return command(*args, stop={k: v for k, v in stop.items() if v is not None}, **kwargs)

    for name in reversed(STOP_OPTIONS):
        kind = TYPES.get(name) or _kind(hints[name])
        spelt = SPELLING.get(name, "--" + name.replace("_", "-"))
        text = f"{docs[name]} Replaces the sweep file's `{name}:`."
        with_stop = click.option(spelt, name, type=kind, default=None, help=text)(with_stop)
    return with_stop


def parse_knobs(pairs: tuple[str, ...]) -> dict:
    """`--knob NAME=VALUE` pairs as a dict (values typed as in a sweep file)."""
    from harness.experiment.sweep import knob_value  # lazy: the sweep layer loads every scheme (torch)

    out = {}
    for pair in pairs:
        k, _, v = pair.partition("=")
        if not _ or not k.strip():
            raise UserError(f"--knob {pair!r} is not NAME=VALUE; write e.g. --knob bucket_cap_mb=25")
        out[k.strip()] = knob_value(v)
    return out


TRACE_META = "ddlbench_trace_iters"


def trace_option(what: str):
    """`--trace [N]` (N = 3 when omitted): record a timeline of N measured iterations of every rank. Kept
    in the click context (ctx.meta[TRACE_META]) rather than passed as a parameter."""

    def keep(ctx, _param, value):
        if value is not None:
            ctx.meta[TRACE_META] = value
        return value

    return click.option(
        "--trace",
        type=click.IntRange(min=1),
        is_flag=False,
        flag_value=3,
        default=None,
        expose_value=False,
        callback=keep,
        metavar="[N]",
        help=f"Record a timeline of the first N measured iterations (default 3) of every rank "
        f"of {what} into the cell's trace.json (Perfetto, chrome://tracing); same cell id.",
    )


def output_option(more: str = "", **kwargs):
    """`--output RUN_DIR`, a command's run directory (default results/<run-id>: harness/results/store.py);
    `more` is added to its help, `kwargs` to its click.Path."""
    return click.option(
        "--output",
        type=click.Path(path_type=Path, **kwargs),
        help=f"Run directory (default {RESULTS_ROOT}/<run-id>){more}.",
    )


RUN_OPTIONS = (
    output_option(),
    click.option(
        "--resume",
        is_flag=True,
        help="Into an existing --output: run only the cells it lacks (an interrupted run goes on).",
    ),
    click.option("--overwrite", is_flag=True, help="Discard the run already in --output and measure it again."),
    click.option(
        "--oversubscribe",
        is_flag=True,
        help="Allow more workers x threads than this box has cores (timings are then noise).",
    ),
    click.option(
        "--cold",
        is_flag=True,
        help="Start the ranks as fresh interpreters instead of forking them from one pre-imported "
        "process (warm, the default): for comparison; replaces a sweep file's `cold:`.",
    ),
    click.option(
        "--strict-network",
        is_flag=True,
        help="Exit 1 when a multi-node cell's traffic did not go mainly through the interface its "
        "network profile names (summary column net_check).",
    ),
)
"""The options `run` and `sweep` share."""


def run_options(command):
    """Decorate `run` or `sweep` with RUN_OPTIONS, handed to the command as `options` (a RunOptions:
    --output, --resume, --overwrite, --oversubscribe, --cold) and `strict_network` (how the exit status
    judges the run, harness/report/console.finish_run)."""

    @functools.wraps(command)
    def with_options(*args, output, resume, overwrite, oversubscribe, cold, **kwargs):
        options = RunOptions(output=output, resume=resume, overwrite=overwrite, oversubscribe=oversubscribe, cold=cold)
        return command(*args, options=options, **kwargs)

    for option in reversed(RUN_OPTIONS):
        with_options = option(with_options)
    return with_options


def nodes_option(f):
    """The plain node list's flags (as `torchrun --nnodes` takes them); they win over the scheduler's."""
    for name, kind, text in reversed(
        (
            ("--nnodes", int, "Nodes in a multi-node job without Slurm; every node runs this same command."),
            ("--node-rank", int, "This node's index (0 leads: plans the cells, writes the run)."),
            ("--nproc-per-node", int, "Workers per node (default: the scheduler's, else one per GPU, one on CPU)."),
            ("--master-addr", str, "Node 0's address, where the c10d store listens."),
            ("--master-port", int, "The store's port (default 29400)."),
            (
                "--secret-file",
                click.Path(dir_okay=False),
                "The job secret, the same file on every node: node 0 signs each cell with it and the others "
                "run only what it signed (else DDLBENCH_JOB_SECRET; without either the store is open).",
            ),
        )
    ):
        f = click.option(name, type=kind, help=text)(f)
    return click.option(
        "--join-timeout",
        "join_timeout_s",
        default=300.0,
        show_default=True,
        type=float,
        help="Seconds node 0 waits for every node to join (multi-node job).",
    )(f)


APPENDED = "; the run is appended to it after it ends (ddlbench history add)"


def history_option(required: bool = False, more: str = APPENDED):
    """`--history DIR`, a history folder (harness/history/store.py); on `run`, `sweep` and `slurm collect`
    the run is appended to it after it ends (`append_history`); `more` ends its help."""
    return click.option(
        "--history",
        type=click.Path(path_type=Path),
        required=required,
        help=f"History folder (one row per cell and run, across commits){more}.",
    )


def append_history(history: Path | None, run_dir: Path) -> None:
    """Append a finished run to --history (nothing without it), one line per run added."""
    if history is None:
        return
    # lazy: what runs the command, not what declares it (docs/ARCHITECTURE.md, "Commands")
    from harness.history.record import add_runs

    for line in add_runs(history, [run_dir]):
        click.echo(line)
