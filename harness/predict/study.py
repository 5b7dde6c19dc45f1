"""The study's whole scaling curve predicted (harness/predict/study_cluster.py: its testbed and software as model
inputs, harness/predict/study_inputs.py: each with its range and source): every method on every network at
4, 8, 16 and 32 GPUs, each cell with an interval from its inputs' ranges (`pred_low`, `pred_high`:
throughput at the 10th and 90th percentiles over Latin-hypercube samples of the inputs, the same simulation
run on each), and which input moves which cells by how much (`sensitivity`). scripts/study_prediction.py
writes the report.
"""

from __future__ import annotations

import multiprocessing
import os
from pathlib import Path

import numpy as np
import pandas as pd

from harness.predict.compute import compute_model
from harness.predict.predictor import STUDY_METHODS, predict_rows
from harness.predict.profiler import counted_profile
from harness.predict.study_cluster import FAMILIES, GPUS_PER_NODE, NODE_COUNTS, study_network
from harness.predict.study_inputs import INPUTS

WORKLOADS = ("resnet50", "bert-base", "bert-large")
EXTRA = ("ddp", "horovod")
"""Beside the study's seven: torch DDP and Horovod with its defaults, as ddlbench runs them."""
KEYS = ["compute_source", "workload", "network", "workers", "scheme"]
"""What identifies a predicted cell."""
LOW_Q, HIGH_Q = 0.10, 0.90
"""The interval: 10th and 90th percentiles of the sampled predictions (an 80% interval), widened to hold the
nominal prediction where the samples all fall to one side of it."""
SAMPLES = 32
"""Latin-hypercube samples of the inputs behind each interval."""


def compute_models(profiles: Path | None, compute: str) -> list:
    """compute: `profile` (measured layer profile, calibrated) or `flops` (roofline, calibrated)."""
    models = []
    for wl in WORKLOADS:
        f = profiles / f"profile-{wl}.parquet" if profiles else None
        if compute == "profile" and f is not None and f.exists():
            table = pd.read_parquet(f)
        else:
            table = counted_profile(wl)
        models.append(compute_model(table, "study-gpu", mode=compute))
    return models


def predict_curve(models: list, compute: str | None = None, values: dict | None = None,
                  node_counts=NODE_COUNTS, families=FAMILIES, methods=None, knobs: dict | None = None) -> pd.DataFrame:
    """Every workload, network, size and method for one set of input values (nominal by default); `knobs`
    (method -> knobs) override the study's own; `compute` labels the rows' compute source (None: the models')."""
    v = values or INPUTS.nominal()
    scaled = [m.scaled(v["compute_scale"]) for m in models] if v["compute_scale"] != 1.0 else models
    methods = list(methods or (*STUDY_METHODS, *EXTRA))
    frames = []
    for family in families:
        for n in node_counts:
            sn = study_network(v, family, n)
            mk = {m: {**sn.knobs.get(m, {}), **(knobs or {}).get(m, {})} for m in set(sn.knobs) | set(knobs or {})}
            frames.append(predict_rows(scaled, [sn.network], [n], GPUS_PER_NODE, methods, servers=n, knobs=mk,
                                       run_id=f"study-prediction-{compute or 'auto'}", server_hosts="dedicated"))
    df = pd.concat(frames, ignore_index=True)
    if compute:
        df["compute_source"] = compute
    return df


def _throughput(args) -> np.ndarray:
    models, values, kw = args
    return predict_curve(models, None, values, **kw)["throughput_median"].to_numpy()


def _map(fn, jobs: list, processes: int | None) -> list:
    processes = processes or min(len(jobs), os.cpu_count() or 1)
    if processes <= 1:
        return [fn(j) for j in jobs]
    with multiprocessing.get_context("fork").Pool(processes) as pool:
        return pool.map(fn, jobs)


def with_intervals(models: list, compute: str | None = None, samples: int = SAMPLES, seed: int = 0,
                   processes: int | None = None, **kw) -> pd.DataFrame:
    """The nominal prediction with `pred_low`, `pred_high` (throughput, samples/s): the 10th and 90th
    percentiles of the same simulation run on `samples` Latin-hypercube samples of the inputs' ranges
    (`kw`: predict_curve's node_counts, families, methods, knobs)."""
    df = predict_curve(models, compute, None, **kw)
    draws = _map(_throughput, [(models, v, kw) for v in INPUTS.samples(samples, seed)], processes)
    x, nominal = np.vstack(draws), df["throughput_median"].to_numpy()
    # an input whose value sits at an end of its range (10 GbE's 9.4 Gb/s is the most TCP carries) pushes
    # every sample one way: the interval still holds the prediction it surrounds
    df["pred_low"] = np.minimum(np.quantile(x, LOW_Q, axis=0), nominal)
    df["pred_high"] = np.maximum(np.quantile(x, HIGH_Q, axis=0), nominal)
    df["pred_samples"] = samples
    return df


def sensitivity(models: list, compute: str | None = None, processes: int | None = None, **kw) -> pd.DataFrame:
    """Each uncertain input moved alone to either end of its range: the relative change of every cell's
    predicted throughput; one row per (input, end) with how many cells it moves by more than 5%, its median
    and largest change and the cell moved most; the inputs that move most cells first."""
    base = predict_curve(models, compute, None, **kw)
    corners = INPUTS.corners()
    draws = _map(_throughput, [(models, v, kw) for _, _, v in corners], processes)
    x0 = base["throughput_median"].to_numpy()
    rows = []
    for (name, end, _), x in zip(corners, draws):
        rel = x / x0 - 1
        k = int(np.argmax(np.abs(rel)))
        cell = base.iloc[k]
        rows.append({"input": name, "end": end, "value": INPUTS[name].low if end == "low" else INPUTS[name].high,
                     "unit": INPUTS[name].unit, "median_change": float(np.median(np.abs(rel))),
                     "max_change": float(rel[k]), "cells_moved_5pct": int((np.abs(rel) > 0.05).sum()),
                     "cells": len(rel),
                     "most_moved": f"{cell['workload']} {cell['scheme']} {cell['network']} {int(cell['workers'])} GPUs"})
    out = pd.DataFrame(rows)
    out["_reach"] = out["max_change"].abs()
    return out.sort_values(["cells_moved_5pct", "_reach"], ascending=False, ignore_index=True).drop(columns="_reach")
