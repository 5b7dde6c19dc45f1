"""Scheme knobs: one frozen dataclass per scheme, typed, with a default and a docstring under each field.

    @dataclass(frozen=True)
    class DDPKnobs(Knobs):
        bucket_cap_mb: Annotated[float, Range(gt=0)] = 25.0
        \"\"\"DDP gradient bucket size, MB (DDP's default 25).\"\"\"

`Knobs.resolve(given, scheme)` is the one place knobs are checked: unknown names, the type (values are
converted to the field's type, None only where the type allows it, NaN and infinity never) and the
range are refused with a UserError saying what, why and how to fix. A resolved instance turns back into
the plain dict that CellSpec.knobs records (`as_dict`); `spec()` is the name -> Knob view that
`ddlbench list` prints, its text read from the docstrings under the fields (see docs/ARCHITECTURE.md,
"Scheme").
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import math
import types
import typing
from dataclasses import dataclass
from typing import Any

from harness.core.errors import UserError
from harness.core.fields import field_docs


@dataclass(frozen=True)
class Range:
    """Bounds a numeric knob must respect (None = unbounded on that side)."""

    gt: float | None = None
    """Value must be greater than this."""
    ge: float | None = None
    """Value must be at least this."""
    le: float | None = None
    """Value must be at most this."""

    def problem(self, value) -> str | None:
        """Why `value` is out of range, or None when it is in range."""
        if self.gt is not None and not value > self.gt:
            return f"must be > {self.gt:g}"
        if self.ge is not None and not value >= self.ge:
            return f"must be >= {self.ge:g}"
        if self.le is not None and not value <= self.le:
            return f"must be <= {self.le:g}"
        return None


@dataclass(frozen=True)
class Grid:
    """The values of a knob `ddlbench advise` predicts over, declared beside the knob:
    `bucket_cap_mb: Annotated[float, Range(gt=0), Grid(1, 5, 25, 100)] = 25.0`. A knob without one keeps
    its default in every candidate."""

    values: tuple
    """Candidate values (the default among them, so the default configuration is always a candidate)."""

    def __init__(self, *values):
        object.__setattr__(self, "values", tuple(values))


@dataclass(frozen=True)
class Knob:
    """One knob as `ddlbench list` shows it (a view derived from a Knobs dataclass)."""

    default: Any
    """Value used when the user sets none."""
    doc: str
    """What it controls, with its unit."""
    kind: type = float
    """Type the value is converted to."""
    optional: bool = False
    """None is allowed (it means: decide at run time, e.g. measure)."""
    range: Range | None = None
    """Bounds, if any."""
    grid: tuple = ()
    """Values `ddlbench advise` tries (its Grid); empty = the default only."""


@dataclass(frozen=True)
class Knobs:
    """Base of every scheme's knobs; a scheme without knobs uses it as is."""

    @classmethod
    def spec(cls) -> dict[str, Knob]:
        return _spec(cls)

    @classmethod
    def resolve(cls, given: dict | None, scheme: str) -> Knobs:
        """Validated knobs from user input (a sweep file, --knob, or a recorded CellSpec.knobs)."""
        given = dict(given or {})
        spec = cls.spec()
        unknown = sorted(set(given) - set(spec))
        if unknown:
            known = ", ".join(spec) or "none"
            raise UserError(
                f"unknown knob(s) {', '.join(unknown)} for scheme {scheme!r}: "
                f"its knobs are {known} (see `ddlbench list`)"
            )
        values = {name: _convert(scheme, name, knob, given.get(name, knob.default)) for name, knob in spec.items()}
        return cls(**values)

    @classmethod
    def grid(cls) -> list[dict]:
        """Every combination of the declared Grid values (knobs without one at their default), the
        default combination first: the knob settings `ddlbench advise` predicts for the scheme."""
        spec = cls.spec()
        axes = [[k.default, *(v for v in k.grid if v != k.default)] if k.grid else [k.default] for k in spec.values()]
        return [cls.resolve(dict(zip(spec, combo)), cls.__name__).as_dict() for combo in itertools.product(*axes)]

    def as_dict(self) -> dict:
        """The plain dict recorded in CellSpec.knobs (and the knob_* columns), in field order."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}


def _convert(scheme: str, name: str, knob: Knob, value):
    fix = "fix it in the sweep file or --knob"
    if value is None:
        if knob.optional:
            return None
        raise UserError(f"knob {name} of scheme {scheme!r} needs a value (it has no automatic choice); {fix}")
    try:
        out = knob.kind(value)
    except (TypeError, ValueError):
        raise UserError(f"knob {name}={value!r} of scheme {scheme!r} is not a {knob.kind.__name__}; {fix}") from None
    if isinstance(out, float) and not math.isfinite(out):
        raise UserError(f"knob {name}={value!r} of scheme {scheme!r} must be a finite number; {fix}")
    why = knob.range.problem(out) if knob.range is not None else None
    if why:
        raise UserError(f"knob {name}={value!r} of scheme {scheme!r} {why} ({knob.doc.rstrip('.')}); {fix}")
    return out


@functools.cache
def _spec(cls: type) -> dict[str, Knob]:
    hints = typing.get_type_hints(cls, include_extras=True)
    docs = field_docs(cls)
    out = {}
    for f in dataclasses.fields(cls):
        kind, optional, rng, grid = _unpack(hints[f.name])
        out[f.name] = Knob(f.default, docs.get(f.name, ""), kind, optional, rng, grid)
    return out


def _unpack(hint) -> tuple[type, bool, Range | None, tuple]:
    """(type, None allowed, range, grid values) from `Annotated[float | None, Range(...), Grid(...)]` and
    simpler hints."""
    rng, grid = None, ()
    if typing.get_origin(hint) is typing.Annotated:
        hint, *extra = typing.get_args(hint)
        rng = next((e for e in extra if isinstance(e, Range)), None)
        grid = next((e.values for e in extra if isinstance(e, Grid)), ())
    optional = False
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        optional = len(args) < len(typing.get_args(hint))
        hint = args[0]
    return hint, optional, rng, grid
