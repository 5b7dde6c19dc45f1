"""The `ddlbench run` options that set a cell, made from CellSpec's declarations (harness/cell.py): one
option per field, its type and default from the field, its help from the field's docstring. Only an
option's spelling and the few defaults `run` chooses differently are written here."""

from __future__ import annotations

import dataclasses
import types
import typing

import click

from harness.cell import SERVER_HOSTS, CellSettings, CellSpec
from harness.devices import DIST_BACKENDS
from harness.schemes.knobs import field_docs

RUN_FIELDS = ("workload", "scheme", "backend", "workers", "servers",
              *(f.name for f in dataclasses.fields(CellSettings)), "dtype", "server_hosts")
"""The CellSpec fields `ddlbench run` takes as options (knobs come as --knob NAME=VALUE)."""
SPELLING = {"timeout_s": "--timeout"}
"""Options not spelt --<field-name>."""
RUN_DEFAULTS = {"scheme": "ddp", "workers": 2}
"""Defaults of `run` that differ from the cell's: a single command should compare something."""
CHOICES = {"server_hosts": SERVER_HOSTS, "dist_backend": DIST_BACKENDS}


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
        default = RUN_DEFAULTS.get(name, declared[name])
        required = default is dataclasses.MISSING
        kind = click.Choice(CHOICES[name]) if name in CHOICES else _kind(hints[name])
        given = {"required": True} if required else {"default": default, "show_default": default is not None}
        command = click.option(SPELLING.get(name, "--" + name.replace("_", "-")), name, type=kind,
                               help=docs[name], **given)(command)
    return command
