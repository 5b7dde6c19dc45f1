"""The simulation-model contract: what a scheme registers beside itself (`register(..., model=...)`) so
that the predictor can simulate it (see docs/ARCHITECTURE.md, "Scheme").

A model is one function `simulate(compute, cluster, knobs, p2p) -> Outcome`: one worker's iteration on
a cluster, all workers assumed alike (same compute, same schedule: the slowest-rank iteration equals
every rank's). `knobs` is a plain dict of the scheme's knobs plus the model's own `extra_knobs`;
`p2p` is the link parameter-server traffic crosses (None = the cluster's inter-node link). `compute` is a
`ComputeModel` (below), which the predictor builds (harness/predict/compute.py).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from harness.core.errors import UserError

ELEM_BYTES = 4  # fp32 gradients (the study's and the harness's only dtype)


@dataclass(frozen=True)
class ComputeModel:
    """One worker's compute as every simulation takes it: per-tensor gradient sizes and readiness, per-layer
    forward and optimizer times (built by harness/predict/compute.py from a profile or from FLOP counts)."""

    workload: str
    """Workload name."""
    sample_unit: str
    """img | seq."""
    batch: int
    """Per-worker batch the times are for."""
    seq_len: int | None
    """Sequence length."""
    grad_bytes: tuple
    """Gradient bytes per tensor, in parameter order."""
    numels: tuple
    """Elements per tensor, in parameter order."""
    ready_order: tuple
    """Parameter indices in the order their gradients become ready."""
    ready_s: tuple
    """Per parameter index: seconds after the start of backward when its gradient is ready."""
    backward_total_s: float
    """Whole backward, seconds."""
    layers: tuple
    """Parameter indices of each owning layer, layers in forward order."""
    layer_forward_s: tuple
    """Forward seconds per layer (forward order)."""
    layer_optimizer_s: tuple
    """Optimizer seconds per layer (forward order)."""
    flops_per_sample: float = math.nan
    """Forward + backward FLOPs per sample (counted)."""
    device: str = ""
    """Where the times come from (device or preset name)."""
    layer_names: tuple = ()
    """Module name of each layer (forward order), from the profile's `layer` column: schemes that group
    layers by the model's structure (FSDP's units) read it; () when unknown."""
    param_names: tuple = ()
    """Each tensor's parameter name, in parameter order (the profile's `param_name`): BytePS declares keys
    in their sorted order (harness/sim/byteps.py); () when unknown."""

    @property
    def forward_s(self) -> float:
        return sum(self.layer_forward_s)

    @property
    def optimizer_s(self) -> float:
        return sum(self.layer_optimizer_s)

    @property
    def iteration_s(self) -> float:
        """One worker, no communication."""
        return self.forward_s + self.backward_total_s + self.optimizer_s

    @property
    def total_grad_bytes(self) -> int:
        return int(sum(self.grad_bytes))

    def backward_deltas(self) -> list[float]:
        """Per tensor in ready order: seconds after the previous gradient (merge_plan's input)."""
        out, prev = [], 0.0
        for i in self.ready_order:
            out.append(max(0.0, self.ready_s[i] - prev))
            prev = max(prev, self.ready_s[i])
        return out

    def scaled(self, factor: float, batch: int | None = None, device: str | None = None) -> ComputeModel:
        return replace(
            self,
            ready_s=tuple(t * factor for t in self.ready_s),
            backward_total_s=self.backward_total_s * factor,
            layer_forward_s=tuple(t * factor for t in self.layer_forward_s),
            layer_optimizer_s=tuple(t * factor for t in self.layer_optimizer_s),
            batch=batch or self.batch,
            device=device or self.device,
        )

    def scaled_backward(self, factor: float) -> ComputeModel:
        """The backward alone `factor` times as long (the gradients' ready times with it)."""
        return replace(
            self, ready_s=tuple(t * factor for t in self.ready_s), backward_total_s=self.backward_total_s * factor
        )

    def calibrated(self, samples_per_s: float, batch: int, device: str) -> ComputeModel:
        """Scaled so that one worker runs `batch` samples at `samples_per_s`."""
        if samples_per_s <= 0:
            raise UserError(f"throughput must be > 0 samples/s, got {samples_per_s}")
        return self.scaled((batch / samples_per_s) / self.iteration_s, batch, device)


@dataclass
class Outcome:
    iter_s: float
    """Start of one iteration to the start of the next."""
    forward_s: float
    """Forward, seconds."""
    backward_s: float
    """Backward, seconds."""
    comm_wait_s: float
    """Blocked after backward, waiting for communication (as the timing loop measures it)."""
    optimizer_s: float
    """Optimizer step, seconds."""
    plan: dict = field(default_factory=dict)
    """Plan facts (groups, partitions...), as the real scheme's describe() records them."""


@dataclass(frozen=True)
class Model:
    simulate: Callable[..., Outcome]
    """(compute, cluster, knobs, p2p link or None) -> Outcome."""
    extra_knobs: dict = field(default_factory=dict)
    """Knobs of the model alone (name -> default), beside the scheme's: e.g. a server's summing rate."""
    runs: Callable[..., tuple | None] | None = None
    """(cluster, knobs) -> the simulation `simulate` runs there, named with the knobs it reads, where another
    method's model runs the very same one (the study's WFBP-PS and ByteScheduler-PS: BytePS's pipeline); the
    predictor keeps one outcome for every method that names it. None, or a None answer: the method's own."""


@dataclass(frozen=True)
class NoModel:
    reason: str
    """Why the scheme has no simulation model (shown when one asks to predict it)."""
