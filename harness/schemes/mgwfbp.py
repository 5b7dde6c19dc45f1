"""`mgwfbp` (merged-gradient WFBP, Shi, Chu, Li, INFOCOM 2019): consecutive gradients are merged into
groups chosen by the all-reduce cost model t(m) = alpha + beta*m and the profiled backward times, then
each group is all-reduced as one buffer as soon as its last gradient is ready.

alpha and beta come from this cluster's own all-reduce sweep: given as knobs, read from a stored
`ddlbench commbench` run (knob commbench_run), or else measured at start-up on the workers' group
(sizes 4 KB..16 MB)."""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Annotated

from harness.grouping.cost import ALPHA_BETA_PROBE_SIZES, fit_alpha_beta
from harness.grouping.rules import merge_plan
from harness.measure.collective import time_sizes
from harness.results.alpha_beta import fit_from_run
from harness.schemes.base import register
from harness.schemes.bucketed import BucketSync
from harness.schemes.knobs import Grid, Knobs, Range
from harness.sim.bucketed import mgwfbp
from harness.sim.model import Model


@dataclass(frozen=True)
class MGWFBPKnobs(Knobs):
    alpha_s: Annotated[float | None, Range(ge=0), Grid(None, 0.001, 0.01)] = None
    """all-reduce start-up time, s (None = measure at start-up)"""
    beta_s_per_mb: Annotated[float | None, Range(ge=0)] = None
    """all-reduce time per MB, s (None = measure at start-up)"""
    commbench_run: str | None = None
    """run directory of `ddlbench commbench` whose fit to use"""


class MGWFBP(BucketSync):
    overlap = True
    profile_iters = 3

    def __init__(self, ctx):
        super().__init__(ctx)
        self.alpha: float | None = None  # None until set-up has its alpha/beta (plan_buckets then plans)
        self.beta: float | None = None

    def setup(self, model):
        model = super().setup(model)
        alpha, beta = self.knobs.alpha_s, self.knobs.beta_s_per_mb
        source = "knobs"
        if (alpha is None or beta is None) and self.knobs.commbench_run:
            a, b = fit_from_run(self.knobs.commbench_run, "allreduce", self.ctx.workers)
            alpha = a if alpha is None else alpha
            beta = b * (1 << 20) if beta is None else beta
            source = f"commbench {self.knobs.commbench_run}"
        if alpha is None or beta is None:
            source = "measured at start-up"
            a, b = self._measure_alpha_beta()
            alpha = a if alpha is None else alpha
            beta = b * (1 << 20) if beta is None else beta
        self.alpha, self.beta = self.ctx.transport.broadcast_object((alpha, beta / (1 << 20)), src=0)
        self.plan.update(alpha_s=self.alpha, beta_s_per_mb=self.beta * (1 << 20), alpha_beta_source=source)
        return model

    def _measure_alpha_beta(self, reps: int = 3) -> tuple[float, float]:
        """The all-reduce fit on this group, timed by the one collective timer (one warm-up per size)."""
        sizes = ALPHA_BETA_PROBE_SIZES
        times = time_sizes(self.ctx.transport, "allreduce", sizes, reps, 1, self.ctx.rank, self.ctx.device)
        return fit_alpha_beta([float(s) for s in sizes], [statistics.median(times[s]) for s in sizes])

    def plan_buckets(self, order, backward_s):
        if self.alpha is None:  # before set-up finished: plain per-tensor order
            return [[i] for i in order]
        sizes = [self.params[i].numel() * self.params[i].element_size() for i in order]
        groups = merge_plan(backward_s, sizes, self.alpha, self.beta)
        self.plan["group_sizes"] = [len(g) for g in groups]
        return [[order[j] for j in g] for g in groups]


register(
    "mgwfbp",
    MGWFBP,
    "merged-gradient WFBP: groups chosen by the alpha-beta model and profiled backward",
    needs=("allreduce",),
    knobs=MGWFBPKnobs,
    model=Model(mgwfbp),
)
