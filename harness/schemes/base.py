"""The scheme contract: how gradients are synchronised between backward and the optimizer step.

A scheme is written once against harness.contracts.transport.Transport. The timing loop
(harness.measure.loop) calls, per iteration: forward, `before_backward()`, `backward(loss)`,
`after_backward()`, `wait()`, `step()`; `quiesce()` before the first measured iteration and `flush()`
once at the end. The worker calls `setup()` first and, after the loop, `probe_comm()`,
`final_parameters()`, `describe()`, `comm_bytes_per_iter()` and `shutdown()`. Every hook is declared
here with a no-op (or plain) default, so the loop and the worker never probe for one. Hooks registered
in `setup` may start communication during backward (and, for ByteScheduler, finish it during the next
forward). A scheme registers its knobs (a frozen dataclass, harness.schemes.knobs) and its simulation
model (harness.sim.model) beside it: see docs/ARCHITECTURE.md, "Scheme".
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

import torch

from harness.contracts.backend import providers
from harness.contracts.capabilities import check_words
from harness.core.registry import Registry
from harness.measure.timer import ForwardWaits, make_clock
from harness.schemes.knobs import Knob, Knobs


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
    knobs: Knobs
    """Resolved knobs of this scheme (its own Knobs dataclass)."""
    make_optimizer: Callable[[list[torch.nn.Parameter]], torch.optim.Optimizer]
    """The one optimizer recipe every scheme uses (same algorithm and hyperparameters)."""
    log: Callable[[str], None] = print
    """Where a scheme writes progress notes (the rank's log)."""
    dtype: str = "fp32"
    """The cell's compute dtype (docs/ARCHITECTURE.md, "Precision"): schemes whose framework owns mixed
    precision (native_precision) configure it from this; the others see fp32 parameters and gradients."""


class Scheme:
    """Base class: plain training with no communication; every hook of the contract has its default here."""

    name: ClassVar[str] = ""
    profile_iters: int = 0
    """Iterations a scheme spends profiling (synchronising everything after backward) before its plan
    takes over; the worker keeps at least that many out of the measurement while `profiling`."""

    def __init__(self, ctx: SchemeContext):
        self.ctx = ctx
        self.knobs = ctx.knobs
        self.params: list[torch.nn.Parameter] = []
        self.optimizer: torch.optim.Optimizer | None = None
        self.plan: dict = {}
        self.profiling = False
        """True while the first `profile_iters` iterations still run (set in setup by schemes that profile)."""

    # --- life cycle -------------------------------------------------------------------------
    def setup(self, model: torch.nn.Module) -> torch.nn.Module:
        """Register hooks, build the optimizer; return the module to call for forward."""
        self.params = [p for p in model.parameters() if p.requires_grad]
        self.optimizer = self.ctx.make_optimizer(self.params)
        return model

    def before_backward(self) -> None:
        """Called after forward, before backward."""

    def backward(self, loss: torch.Tensor) -> None:
        """Backward of the loss; a scheme whose framework owns backward (DeepSpeed) overrides it."""
        loss.backward()

    def after_backward(self) -> None:
        """Called once backward has returned (issue what hooks did not)."""

    def wait(self) -> None:
        """Block until the gradients the next step needs are synchronised."""

    def step(self) -> None:
        """Optimizer step. Gradients are freed as a user's loop frees them (set_to_none): schemes that
        keep views into persistent gradients (buckets, partitions) override this and zero in place."""
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)

    def quiesce(self) -> None:
        """Before the barrier that opens the measurement: finish anything a background thread still
        issues, so the barrier's collective does not interleave with it."""

    def flush(self) -> None:
        """Finish anything still outstanding at the end of the run (parameters final after this)."""

    def shutdown(self) -> None:
        """Release what setup started (threads), before the transport shuts down."""

    native_precision: ClassVar[bool] = False
    """True when the scheme's framework applies a bf16 cell's precision itself (DeepSpeed's bf16 section):
    the worker then runs forward and loss without torch.autocast (docs/ARCHITECTURE.md, "Precision")."""

    def reduce_dtype(self) -> str:
        """dtype the gradients are reduced in. Under autocast the parameters, hence .grad, stay fp32 and
        a scheme reduces .grad as DDP does: fp32 (schemes that cast or own precision override this)."""
        return "fp32"

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

    def final_parameters(self, model: torch.nn.Module) -> dict[str, torch.Tensor]:
        """Every parameter in full on this rank, for the lossless check (schemes that shard parameters,
        ZeRO-3, gather them; collective: every rank calls it)."""
        return {n: p.detach().cpu() for n, p in model.named_parameters()}

    # --- waits inside forward (docs/ARCHITECTURE.md, "Timing loop") ------------------------------
    def forward_wait(self):
        """Context manager around a blocking wait a scheme performs inside forward (a pre-hook): the loop
        bills it to `forward_wait_s` instead of `forward_s`. Block the CPU until the communication has
        really finished (on CUDA a completion probe, not a stream-ordering Work.wait())."""
        return self._forward_waits().waiting()

    def take_forward_waits(self) -> list:
        """The loop's side: the waits recorded since the last call (pairs of clock marks), forgotten."""
        return self._forward_waits().take()

    def _forward_waits(self) -> ForwardWaits:
        w = self.__dict__.get("_fwd_waits")
        if w is None:
            w = self._fwd_waits = ForwardWaits(make_clock(self.ctx.device))
        return w

    # --- helpers for subclasses ---------------------------------------------------------------
    def pre_hook_applying(self, j: int):
        """A forward pre-hook for layer j of a scheme that defers its update to the next forward (dear,
        bytescheduler): if `self.applied[j]` is still False, call `self._apply(j)` (the subclass defines
        both) before the layer runs."""

        def pre_hook(_module, _args):
            if not self.applied[j]:
                self._apply(j)

        return pre_hook

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
    needs: frozenset = frozenset({"allreduce"})
    """What it asks of a backend (harness/contracts/capabilities.py); it runs on every backend that provides it."""
    knob_class: type = Knobs
    """The scheme's frozen Knobs dataclass."""
    parameter_server: bool = False
    """True when the cell needs server processes."""
    communicates: bool = True
    """False only for the `local` baseline."""
    model: Any = None
    """Its simulation model (harness.sim.model.Model), or NoModel(reason) saying why there is none."""
    dtypes: tuple = ("fp32", "bf16")
    """Compute dtypes the scheme runs (harness.contracts.training.DTYPES); a cell asking another is refused."""

    @property
    def backends(self) -> tuple[str, ...]:
        """Backends the scheme runs on, from what each provides (the first labels its predicted rows)."""
        return providers(self.needs)

    @property
    def knobs(self) -> dict[str, Knob]:
        """name -> Knob (default, doc, kind): the view `ddlbench list` prints."""
        return self.knob_class.spec()

    def make_knobs(self, given: dict | None) -> Knobs:
        """The validated Knobs instance a scheme reads (`self.knobs.bucket_cap_mb`)."""
        return self.knob_class.resolve(given, self.name)

    def resolve_knobs(self, given: dict | None) -> dict:
        """The validated knobs as the plain dict CellSpec.knobs records."""
        return self.make_knobs(given).as_dict()


SCHEMES: Registry[SchemeEntry] = Registry("scheme")


def register(
    name: str,
    cls: type,
    description: str,
    *,
    needs=("allreduce",),
    knobs: type = Knobs,
    parameter_server=False,
    communicates=True,
    model=None,
    dtypes=("fp32", "bf16"),
) -> SchemeEntry:
    """Register a scheme under `name`: what it needs of a backend (harness/contracts/capabilities.py), its
    Knobs dataclass and its simulation model."""
    cls.name = name
    return SCHEMES.register(
        name,
        SchemeEntry(
            name,
            cls,
            description,
            check_words(needs, f"scheme {name!r}"),
            knobs,
            parameter_server,
            communicates,
            model,
            tuple(dtypes),
        ),
    )
