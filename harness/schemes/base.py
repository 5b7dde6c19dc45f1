"""The scheme contract: how gradients are synchronised between backward and the optimizer step.

A scheme is written once against harness.backends.base.Transport. The timing loop calls, per
iteration: forward, `before_backward()`, backward, `after_backward()`, `wait()`, `step()`; and
`flush()` once at the end. Hooks registered in `setup` may start communication during backward (and,
for ByteScheduler, finish it during the next forward).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar

import torch

from harness.errors import UserError
from harness.registry import Registry


@dataclass(frozen=True)
class Knob:
    default: Any
    """Value used when the user sets none."""
    doc: str
    """What it controls, with its unit."""
    kind: type = float
    """Type the value is converted to."""


@dataclass
class SchemeContext:
    transport: Any
    """The backend's Transport (None for the `local` baseline)."""
    rank: int
    """Worker rank."""
    workers: int
    """Number of workers."""
    device: torch.device
    """Device of parameters and gradients."""
    knobs: dict
    """Resolved knobs of this scheme."""
    make_optimizer: Callable[[list[torch.nn.Parameter]], torch.optim.Optimizer]
    """The one optimizer recipe every scheme uses (same algorithm and hyperparameters)."""
    log: Callable[[str], None] = print
    """Where a scheme writes progress notes (the rank's log)."""


class Scheme:
    """Base class: a plain per-tensor all-reduce bookkeeping is left to subclasses."""

    name: ClassVar[str] = ""

    def __init__(self, ctx: SchemeContext):
        self.ctx = ctx
        self.knobs = ctx.knobs
        self.params: list[torch.nn.Parameter] = []
        self.optimizer: torch.optim.Optimizer | None = None
        self.plan: dict = {}

    # --- life cycle -------------------------------------------------------------------------
    def setup(self, model: torch.nn.Module) -> torch.nn.Module:
        """Register hooks, build the optimizer; return the module to call for forward."""
        self.params = [p for p in model.parameters() if p.requires_grad]
        self.optimizer = self.ctx.make_optimizer(self.params)
        return model

    def before_backward(self) -> None:
        pass

    def after_backward(self) -> None:
        pass

    def wait(self) -> None:
        pass

    def step(self) -> None:
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=False)

    def flush(self) -> None:
        """Finish anything still outstanding at the end of the run (parameters final after this)."""

    # --- facts for the results ----------------------------------------------------------------
    def comm_bytes_per_iter(self) -> int:
        """Bytes each worker sends into the network per iteration (its gradient bytes, once)."""
        return sum(p.numel() * p.element_size() for p in self.params)

    def describe(self) -> dict:
        """Plan facts recorded with the cell (groups, partitions, alpha/beta...)."""
        return dict(self.plan)

    def probe_comm(self, reps: int = 3) -> float:
        """Seconds to synchronise all gradient bytes once with nothing to overlap (median of reps)."""
        return 0.0

    # --- helpers for subclasses ---------------------------------------------------------------
    def grad_of(self, p: torch.nn.Parameter) -> torch.Tensor:
        if p.grad is None:  # an unused parameter still takes part, or ranks would disagree
            p.grad = torch.zeros_like(p)
        return p.grad


@dataclass(frozen=True)
class SchemeEntry:
    name: str
    """Registered name."""
    cls: type
    """Scheme subclass."""
    description: str
    """One line for `ddlbench list`."""
    backends: tuple = ("torch",)
    """Backends the scheme runs on."""
    knobs: dict = field(default_factory=dict)
    """name -> Knob."""
    parameter_server: bool = False
    """True when the cell needs server processes."""
    communicates: bool = True
    """False only for the `local` baseline."""

    def resolve_knobs(self, given: dict | None) -> dict:
        given = dict(given or {})
        out = {}
        for name, knob in self.knobs.items():
            value = given.pop(name, knob.default)
            try:
                out[name] = knob.kind(value) if value is not None else None
            except (TypeError, ValueError):
                raise UserError(f"knob {name}={value!r} of scheme {self.name!r} is not a "
                                f"{knob.kind.__name__}; fix it in the sweep file or --knob") from None
        if given:
            known = ", ".join(self.knobs) or "none"
            raise UserError(f"unknown knob(s) {', '.join(sorted(given))} for scheme {self.name!r}: "
                            f"its knobs are {known} (see `ddlbench list`)")
        return out


SCHEMES: Registry[SchemeEntry] = Registry("scheme")


def register(name: str, cls: type, description: str, *, backends=("torch",), knobs=None,
             parameter_server=False, communicates=True) -> SchemeEntry:
    cls.name = name
    return SCHEMES.register(name, SchemeEntry(name, cls, description, tuple(backends), dict(knobs or {}),
                                              parameter_server, communicates))


def knobs_json(knobs: dict) -> str:
    return json.dumps(knobs, sort_keys=True)
