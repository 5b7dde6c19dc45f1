"""The study's wing (docs/ARCHITECTURE.md, "The study's wing"): everything about the 2019 study (Shi, Tang, Chu et
al., "A Quantitative Survey of Communication Optimizations in Distributed Deep Learning", IEEE Network 2021) that
the general harness does not need: its cluster as model inputs, its stacks' own mechanisms, its calibration to
its one-node table, its whole curve. Its report is an experiment of its own (experiments/study_prediction/, which
imports the wing; the wing imports nothing of it). Nothing outside this folder and the command line imports it
(an import-linter contract, pyproject.toml); it reaches the predictor through the same door a user's cluster
does, by registering its three networks as named clusters (harness/predict/clusters.py).

    ddlbench predict --workload bert-base --device-preset study-gpu --cluster study-ib-100g --intervals 32
    python -m experiments.study_prediction.run --profiles reports/study-prediction/profiles \\
        --calibrate harness/study/one_node.csv --out DIR

Rooms:
  inputs              every input of the study's cluster with value, range, unit and source
  cluster             inputs -> the study's network at 1-8 nodes (links, NCCL's ring and tree, each method's
                      stack and knobs); its sizes and networks
  mgwfbp              the authors' MG-WFBP merge rule (the study's Horovod stack's `mgwfbp_merge`)
  bytescheduler_plugin, gil
                      the 2019 ByteScheduler PyTorch plugin on Horovod and its Python threads under the GIL (the
                      study's ByteScheduler stack's `bytescheduler_run`)
  curve               the whole curve, its intervals, the sensitivity table, the mechanisms taken out
  calibration         the stacks' software costs fitted to the one-node table (one_node.csv)
  two_node            the transports fitted to the two-node table (two_node.csv) on top of it
"""

from __future__ import annotations

from functools import partial

from harness.core.errors import UserError
from harness.predict.clusters import CLUSTERS, ClusterEntry
from harness.study import calibration, two_node
from harness.study.cluster import FAMILIES, GPUS_PER_NODE, PRESET_PREFIX, check_size
from harness.study.curve import predict_curve, with_intervals


def _calibrate(tables: tuple, profiles: dict):
    """The study cluster's calibration for `ddlbench predict --calibrate ONE [--calibrate TWO]`: the stacks'
    software costs from a one-node table, then, given a two-node table, the transports on top (leave-one-workload-
    out is the report's: experiments/study_prediction/prediction.py)."""
    if len(tables) > 2:
        raise UserError(f"--calibrate takes a one-node table and, after it, a two-node table: {len(tables)} given")
    two = two_node.read_two_node(tables[1]) if len(tables) > 1 else None  # its refusals before the one-node fit
    one = calibration.calibrate(tables[0], profiles, lowo=False)
    if len(tables) == 1 or not one.fit.converged:
        return one
    return two_node.calibrate_two_node(one, calibration.read_one_node(tables[0]), two, profiles, lowo=False)


def _curve(family: str, models, calibration=None, **kw):
    return predict_curve(models, values=calibration.values if calibration else None, families=(family,), **kw)


def _intervals(family: str, models, samples: int, calibration=None, **kw):
    fitted = (
        dict(values=calibration.values, fitted=calibration.draws(samples), discrepancy=calibration.discrepancy())
        if calibration
        else {}
    )
    return with_intervals(models, samples=samples, families=(family,), **fitted, **kw)


for _family in FAMILIES:
    CLUSTERS.register(
        PRESET_PREFIX + _family,
        ClusterEntry(
            summary=f"the study's whole cluster on {_family}: nodes of {GPUS_PER_NODE} GeForce RTX 2080 Ti, each "
            f"method's 2019 software and knobs (harness/study/cluster.py)",
            gpus_per_node=GPUS_PER_NODE,
            check_nodes=check_size,
            curve=partial(_curve, _family),
            intervals=partial(_intervals, _family),
            calibrate=_calibrate,
        ),
    )
