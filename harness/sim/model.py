"""The simulation-model contract: what a scheme registers beside itself (`register(..., model=...)`) so
that the predictor can simulate it (see docs/ARCHITECTURE.md, "Scheme").

A model is one function `simulate(compute, cluster, knobs, p2p) -> Outcome`: one worker's iteration on
a cluster, all workers assumed alike (same compute, same schedule: the slowest-rank iteration equals
every rank's). `knobs` is a plain dict of the scheme's knobs plus the model's own `extra_knobs`;
`p2p` is the link parameter-server traffic crosses (None = the cluster's inter-node link).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

ELEM_BYTES = 4  # fp32 gradients (the study's and the harness's only dtype)


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


@dataclass(frozen=True)
class NoModel:
    reason: str
    """Why the scheme has no simulation model (shown when one asks to predict it)."""
