"""ByteScheduler's models, registered beside the bytescheduler-a2a and -ps schemes (docs/ARCHITECTURE.md,
"Predictor"): ddlbench's own engine (harness/sim/bytescheduler_engine.py), the 2019 library's PyTorch plugin on
Horovod where the stack says it runs (harness/sim/bytescheduler_plugin.py: `Stack.leader_only`), and BytePS's
pipeline for ByteScheduler-PS as the study ran it (harness/sim/byteps.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from harness.sim.byteps import byteps
from harness.sim.bytescheduler_engine import ByteSchedulerRun
from harness.sim.bytescheduler_plugin import PluginRun
from harness.sim.model import Outcome

if TYPE_CHECKING:  # annotations only
    from harness.sim.model import ComputeModel
    from harness.sim.network import Cluster


def bytescheduler(c: ComputeModel, cluster: Cluster, knobs: dict, use_ps: bool = False, p2p=None) -> Outcome:
    plugin = cluster.stack.leader_only and not use_ps
    return (PluginRun if plugin else ByteSchedulerRun)(c, cluster, knobs, use_ps, p2p).run()


def bytescheduler_a2a(c, cluster, knobs, p2p=None) -> Outcome:
    """The model of `bytescheduler-a2a`."""
    return bytescheduler(c, cluster, knobs, False)


def bytescheduler_ps(c, cluster, knobs, p2p=None) -> Outcome:
    """The model of `bytescheduler-ps`; on BytePS (the study's) its scheduling is the servers' order of
    sums only (BYTEPS_SERVER_ENABLE_SCHEDULE), so the workers' pipeline is WFBP-PS's."""
    if cluster.stack.byteps is not None:
        return byteps(c, cluster, knobs, fused=False)
    return bytescheduler(c, cluster, knobs, True, p2p)
