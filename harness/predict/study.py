"""The study's table predicted (harness/predict/study_cluster.py: its testbed and configuration as model inputs): every
method on every network of the study, from profiles or FLOP counts (scripts/study_prediction.py writes the report)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from harness.predict.compute import compute_model
from harness.predict.predictor import STUDY_METHODS, predict_rows
from harness.predict.profiler import counted_profile
from harness.predict.study_cluster import (
    GPUS_PER_NODE,
    NODES,
    SERVER_HOSTS,
    study_networks,
)

WORKLOADS = ("resnet50", "bert-base", "bert-large")


EXTRA = ("ddp", "horovod")


def compute_models(profiles: Path | None, compute: str) -> list:
    """compute: `profile` (measured CPU layer profile, calibrated) or `flops` (roofline, calibrated)."""
    models = []
    for wl in WORKLOADS:
        f = profiles / f"profile-{wl}.parquet" if profiles else None
        if compute == "profile" and f is not None and f.exists():
            table = pd.read_parquet(f)
        else:
            table = counted_profile(wl)
        models.append(compute_model(table, "study-gpu", mode=compute))
    return models


def predict_study(models: list, compute: str) -> pd.DataFrame:
    """The whole study table (every workload, network and method) for these compute models."""
    frames = []
    for sn in study_networks():
        frames.append(predict_rows(models, [sn.network], [NODES], GPUS_PER_NODE, list(STUDY_METHODS) + list(EXTRA),
                                   servers=SERVER_HOSTS, knobs=sn.knobs, run_id=f"study-prediction-{compute}",
                                   server_hosts="dedicated"))
    df = pd.concat(frames, ignore_index=True)
    df["compute_source"] = compute
    return df


def study_rows(profiles: Path | None, compute: str) -> pd.DataFrame:
    return predict_study(compute_models(profiles, compute), compute)
