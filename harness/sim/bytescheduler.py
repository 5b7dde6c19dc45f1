"""ByteScheduler's models, registered beside the bytescheduler-a2a and -ps schemes (docs/ARCHITECTURE.md,
"Predictor"): ddlbench's own engine (harness/sim/bytescheduler_engine.py), or a library's own run where the stack
carries one (`Stack.bytescheduler_run`: the study's 2019 PyTorch plugin on Horovod,
harness/study/bytescheduler_plugin.py), and BytePS's pipeline for ByteScheduler-PS (harness/sim/byteps.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from harness.sim.bucketed import wfbp_ps_runs
from harness.sim.byteps import byteps
from harness.sim.bytescheduler_engine import ByteSchedulerRun
from harness.sim.model import Outcome

if TYPE_CHECKING:  # annotations only
    from harness.sim.links import Cluster
    from harness.sim.model import ComputeModel


def bytescheduler(c: ComputeModel, cluster: Cluster, knobs: dict, use_ps: bool = False, p2p=None) -> Outcome:
    own = cluster.stack.bytescheduler_run
    return (own if own is not None and not use_ps else ByteSchedulerRun)(c, cluster, knobs, use_ps, p2p).run()


def bytescheduler_a2a(c, cluster, knobs, p2p=None) -> Outcome:
    """The model of `bytescheduler-a2a`."""
    return bytescheduler(c, cluster, knobs, False)


def bytescheduler_ps(c, cluster, knobs, p2p=None) -> Outcome:
    """The model of `bytescheduler-ps`; on BytePS (the study's) its scheduling is the servers' order of
    sums only (BYTEPS_SERVER_ENABLE_SCHEDULE), so the workers' pipeline is WFBP-PS's."""
    if cluster.stack.byteps is not None:
        return byteps(c, cluster, knobs, fused=False)
    return bytescheduler(c, cluster, knobs, True, p2p)


def bytescheduler_ps_runs(cluster, knobs) -> tuple | None:
    """What `bytescheduler_ps` runs (Model.runs): on BytePS, WFBP-PS's very simulation (its credit is not read)."""
    return wfbp_ps_runs(cluster, knobs)
