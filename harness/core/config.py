"""One loader for the files a user or the study writes as settings: the sweep file (YAML,
harness/experiment/sweep.py), a cluster file (TOML, harness/predict/cluster_file.py) and the study's inputs (TOML,
harness/study/inputs.py). One way to read and parse a file (`load_document`), one type check (`checked`: `true` is
never a number), one check of unknown keys (`unknown_keys`), and one error style: each kind of file words its
problems in a table of templates (`Kind.templates`, str.format fields per problem) and raises them as one exception
class, a UserError for a user's file (docs/ARCHITECTURE.md, "Commands": one line, exit status 2).

    SWEEP = Kind("yaml", {"missing": "sweep file {path} does not exist ...", ...})
    data = load_document(path, SWEEP)
    checked(data["iters"], (int,), SWEEP, "scalar", key="iters", what="an integer")

A problem the kind has no template for is not caught: reading the file raises Python's own exception (the study's
shipped files, whose syntax is the developer's to fix).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

import tomllib
import yaml

from harness.core.errors import UserError

PARSERS: dict[str, Callable[[str], Any]] = {"yaml": yaml.safe_load, "toml": tomllib.loads}
"""A file's format -> its parser (text -> document)."""
LOAD_PROBLEMS = ("missing", "unreadable", "undecodable", "syntax", "empty")
"""What `load_document` may find, each worded by a kind's template when it has one: no file at the path (`path`),
an OSError reading it (`path`, `error`), bytes that are not UTF-8 (`path`, `error`), a parse error (`path`, `error`,
`at`: " at line N" where the parser says), a YAML file with nothing in it (`path`)."""


@dataclass(frozen=True)
class Kind:
    """A kind of settings file: its format (a key of PARSERS), how it words each problem (problem -> str.format
    template) and the exception those are raised as."""

    format: str
    templates: Mapping[str, str] = field(default_factory=dict)
    error: type[Exception] = UserError

    def fail(self, problem: str, **fields: Any) -> NoReturn:
        """Raise the kind's error for `problem`, its template filled with `fields`."""
        raise self.error(self.templates[problem].format(**fields)) from None


def load_document(path: str | Path, kind: Kind) -> Any:
    """The document the file at `path` holds, parsed as `kind.format`; a problem reading it is the kind's error
    (LOAD_PROBLEMS), or Python's own exception where the kind has no template for it."""
    path = Path(path)
    if "missing" in kind.templates and not path.is_file():
        kind.fail("missing", path=path)
    try:
        doc = PARSERS[kind.format](path.read_text())
    except (OSError, UnicodeDecodeError, yaml.YAMLError, tomllib.TOMLDecodeError) as e:
        problem = (
            "unreadable" if isinstance(e, OSError) else "undecodable" if isinstance(e, UnicodeDecodeError) else "syntax"
        )
        if problem not in kind.templates:
            raise
        mark = getattr(e, "problem_mark", None)
        at = f" at line {mark.line + 1}" if mark else ""
        kind.fail(problem, path=path, error=getattr(e, "strerror", None) or e, at=at)
    if doc is None and "empty" in kind.templates:
        kind.fail("empty", path=path)
    return doc


def checked(
    value: Any,
    types: tuple[type, ...],
    kind: Kind,
    problem: str,
    *,
    low: float | None = None,
    finite: bool = False,
    **fields: Any,
) -> Any:
    """`value` when it is one of `types` (a bool only where bool is one of them: YAML's and TOML's `true` is no
    integer), finite where asked and >= `low` where given; the kind's `problem` otherwise, its template filled with
    `value`, `low` and `fields`."""
    ok = isinstance(value, types) and (bool in types or not isinstance(value, bool))
    ok = ok and not (finite and not math.isfinite(value)) and not (low is not None and value < low)
    if not ok:
        kind.fail(problem, value=value, low=low, **fields)
    return value


def unknown_keys(table: Mapping, known: Iterable[str], kind: Kind, **fields: Any) -> None:
    """The kind's `unknown` problem when `table` has a key not `known`: `unknown` and `known` filled in as sorted,
    comma-separated lists, with `fields`."""
    known = set(known)
    unknown = sorted(set(table) - known)
    if unknown:
        kind.fail("unknown", unknown=", ".join(unknown), known=", ".join(sorted(known)), **fields)
