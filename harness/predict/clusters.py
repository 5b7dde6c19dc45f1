"""Whole clusters by name, the door `ddlbench predict` reaches them through (docs/ARCHITECTURE.md, "Predictor"):
a cluster is more than a link preset: its links, each method's software stack and knobs at every size, and,
where it states them, its inputs' ranges (for intervals) and its door to a calibration (`calibrate`: the study's
from its one- and two-node tables; ddlbench's own stacks from a user's runs for cluster files, link presets and
commbench networks, harness/predict/own_clusters.py). A wing
registers its clusters here (the study's: harness/study/, `study-ib-100g` ...); the predictor never names one.

    CLUSTERS.register("my-cluster", ClusterEntry(...))     # a wing's __init__, imported by the CLI
    CLUSTERS.get("study-ib-100g").curve(models, node_counts=(1, 2), methods=[...], knobs={})
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from harness.core.errors import UserError
from harness.core.registry import Registry
from harness.predict.calibration import Calibrate


@dataclass(frozen=True)
class ClusterEntry:
    """One named cluster as the predictor asks it (the curve, its checks, its optional intervals and calibration)."""

    summary: str
    """One line for help texts: what hardware and software it is."""
    gpus_per_node: int
    """GPUs (workers) on each node: fixed by the cluster."""
    check_nodes: Callable[[int], None]
    """Raises a UserError for a node count the cluster is not modelled at."""
    curve: Callable
    """(models, node_counts, methods, knobs, calibration=None) -> predicted rows at the inputs as stated, or as a
    calibration of this cluster fitted them."""
    intervals: Callable | None = None
    """(models, samples, node_counts, methods, knobs, calibration=None) -> the rows with pred_low and pred_high
    from samples of the inputs' stated ranges (and of a calibration's uncertainty); None: it states no ranges."""
    calibrate: Calibrate | None = None
    """The cluster's door to a calibration: ((tables or run directories, ...), {workload: profile table}) -> a
    `Calibration` (harness/predict/calibration.py: its fit, values, draws, table, discrepancy, and how it enters a
    prediction), which `curve` and `intervals` then take; None: nothing of this cluster can be fitted. Every cluster
    predicted at once shares one (`one_calibration`)."""


CLUSTERS: Registry[ClusterEntry] = Registry("cluster", hint="ddlbench predict --help")
"""Named clusters; empty until a wing registers its own (the CLI imports the wings, docs/ARCHITECTURE.md,
"Plugins")."""


def one_calibration(entries: dict[str, ClusterEntry], source) -> Callable:
    """The calibration every cluster in `entries` shares (fitted once, used by all); a one-line error otherwise."""
    fns = {e.calibrate for e in entries.values()}
    if not entries or None in fns or len(fns) != 1:
        fit = [n for n in CLUSTERS if CLUSTERS.get(n).calibrate is not None]
        raise UserError(
            f"--calibrate {source}: it fits the software costs of a cluster that states them; predict "
            f"{', '.join(fit) or 'such a cluster'} alone with it (one calibration at a time), "
            f"or drop --calibrate"
        )
    return fns.pop()
