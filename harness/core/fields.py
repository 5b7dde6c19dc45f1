"""The docstring under each field of a dataclass, read from its source: the help of the options and knobs made
from declarations (CellSpec's, a scheme's Knobs). Imports nothing heavy, so declaring a command's options
imports no torch (docs/ARCHITECTURE.md, "Commands")."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import itertools
import textwrap


def field_docs(cls: type) -> dict[str, str]:
    """The docstring under each field (PEP 257 attribute docstrings), read from the class source along
    its bases; Python itself does not keep them."""
    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if klass is object or not dataclasses.is_dataclass(klass):
            continue
        try:
            tree = ast.parse(textwrap.dedent(inspect.getsource(klass)))
        except (OSError, TypeError, SyntaxError):  # no source (built interactively): no text
            continue
        body = tree.body[0].body
        for stmt, nxt in itertools.pairwise(body):
            if (
                isinstance(stmt, ast.AnnAssign)
                and isinstance(stmt.target, ast.Name)
                and isinstance(nxt, ast.Expr)
                and isinstance(nxt.value, ast.Constant)
                and isinstance(nxt.value.value, str)
            ):
                docs[stmt.target.id] = " ".join(nxt.value.value.split())
    return docs
