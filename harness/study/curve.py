"""The study's whole scaling curve predicted (harness/study/cluster.py: its testbed and software as model
inputs, harness/study/inputs.py: each with its range and source, typed as `StudyValues`): every method on every
network at 4, 8, 16 and 32 GPUs, each cell with an interval from its inputs' ranges (`pred_low`, `pred_high`:
throughput at the 10th and 90th percentiles over Latin-hypercube samples of the inputs, the same simulation
run on each), and which input moves which cells by how much (`sensitivity`). The study's report
(experiments/study_prediction/) writes them out.
"""

from __future__ import annotations

import multiprocessing
import os
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd

from harness.predict.compute import compute_model
from harness.predict.predictor import SEVEN_METHODS, predict_rows
from harness.predict.profiler import counted_profile
from harness.sim.costs import Stack, optimizer_s
from harness.study.cluster import FAMILIES, GPUS_PER_NODE, NODE_COUNTS, study_network
from harness.study.inputs import INPUTS, StudyValues, Values

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
        table = pd.read_parquet(f) if compute == "profile" and f is not None and f.exists() else counted_profile(wl)
        models.append(compute_model(table, "study-gpu", mode=compute))
    return models


def study_compute(m, v: Values):
    """One GPU's iteration as the study measured it (the calibrated model `m`), split anew into forward and
    backward and the optimizer its single-GPU run stepped: SGD for ResNet-50 (every script), for BERT the
    Adam family (its Horovod scripts) or SGD (its BytePS script) mixed by `calib_adam_share`. Each method's
    own optimizer replaces it in its simulation (harness/sim/costs.with_optimizer)."""
    v = StudyValues.of(v)
    st = Stack(py_op_s=v.optimizer.py_op_s, opt_bytes_per_s=v.horovod.d2d_gbyte_s * 1e9)
    share = v.optimizer.calib_adam_share if m.sample_unit == "seq" else 0.0
    opt = [
        share * optimizer_s(st, "adamw", [m.numels[i] for i in g])
        + (1 - share) * optimizer_s(st, "sgd", [m.numels[i] for i in g])
        for g in m.layers
    ]
    compute = m.forward_s + m.backward_total_s
    f = (m.iteration_s - sum(opt)) / compute
    if f <= 0:
        raise ValueError(f"{m.workload}: the optimizer alone ({sum(opt):.3f} s) exceeds the measured iteration")
    return replace(m.scaled(f), layer_optimizer_s=tuple(opt))


def predict_curve(
    models: list,
    compute: str | None = None,
    values: Values | None = None,
    node_counts=NODE_COUNTS,
    families=FAMILIES,
    methods=None,
    knobs: dict | None = None,
) -> pd.DataFrame:
    """Every workload, network, size and method for one set of input values (nominal by default); `knobs`
    (method -> knobs) override the study's own; `compute` labels the rows' compute source (None: the models')."""
    v = StudyValues.of(values or INPUTS.nominal())
    scaled = [study_compute(m, v).scaled(v.compute.compute_scale) for m in models]
    methods = list(methods or (*SEVEN_METHODS, *EXTRA))
    frames = []
    for family in families:
        for n in node_counts:
            sn = study_network(v, family, n)
            mk = {m: {**sn.knobs.get(m, {}), **(knobs or {}).get(m, {})} for m in set(sn.knobs) | set(knobs or {})}
            frames.append(
                predict_rows(
                    scaled,
                    [sn.network],
                    [n],
                    GPUS_PER_NODE,
                    methods,
                    servers=n,
                    knobs=mk,
                    run_id=f"study-prediction-{compute or 'auto'}",
                    server_hosts="dedicated",
                )
            )
    df = pd.concat(frames, ignore_index=True)
    if compute:
        df["compute_source"] = compute
    return df


def _throughput(args) -> np.ndarray | None:
    models, values, kw = args
    try:
        return predict_curve(models, None, values, **kw)["throughput_median"].to_numpy()
    except ValueError:  # a sample whose optimizer alone exceeds a measured iteration: no such cluster
        return None


def _map(fn, jobs: list, processes: int | None) -> list:
    processes = processes or min(len(jobs), os.cpu_count() or 1)
    if processes <= 1:
        return [fn(j) for j in jobs]
    with multiprocessing.get_context("fork").Pool(processes) as pool:
        return pool.map(fn, jobs)


def input_samples(samples: int, seed: int = 0, values: dict | None = None, fitted: list[dict] | None = None) -> list:
    """The value sets behind an interval: Latin-hypercube samples of the inputs' ranges; with a calibration
    (`values`: its fitted inputs in, `fitted`: its bootstrap draws of the fitted parameters) the fitted
    parameters take the fit's draws, the optimizer chosen stays, the other inputs keep their ranges."""
    draws = INPUTS.samples(samples, seed)
    if fitted is None:
        return draws
    if len(fitted) < samples:
        raise ValueError(f"{len(fitted)} draws of the fitted parameters for {samples} samples")
    chosen = {"calib_adam_share": values["calib_adam_share"]} if values else {}
    return [{**d, **chosen, **f} for d, f in zip(draws, fitted)]


def with_intervals(
    models: list,
    compute: str | None = None,
    samples: int = SAMPLES,
    seed: int = 0,
    processes: int | None = None,
    values: dict | None = None,
    fitted: list[dict] | None = None,
    discrepancy: dict | None = None,
    **kw,
) -> pd.DataFrame:
    """The nominal prediction with `pred_low`, `pred_high` (throughput, samples/s): the 10th and 90th
    percentiles of the same simulation run on `samples` Latin-hypercube samples of the inputs' ranges
    (`kw`: predict_curve's node_counts, families, methods, knobs). A calibration (harness/study/
    calibration.py, two_node.py) gives `values` (the nominal with its fitted inputs), `fitted` (draws of them)
    and `discrepancy`: per method, the log-ratios its fit still misses (held-out errors), one drawn into each
    sample of that method's cells, so the model's own error is in the interval beside its inputs'."""
    df = predict_curve(models, compute, values, **kw)
    draws = _map(_throughput, [(models, v, kw) for v in input_samples(samples, seed, values, fitted)], processes)
    kept = [d for d in draws if d is not None]
    if len(kept) < max(2, samples // 2):
        raise ValueError(
            f"{samples - len(kept)} of {samples} input samples describe no possible cluster (an "
            f"optimizer longer than its measured iteration): the ranges contradict the compute"
        )
    x, nominal = np.vstack(kept), df["throughput_median"].to_numpy()
    rng, schemes = np.random.default_rng(seed), df["scheme"].to_numpy()
    for method, pool in (discrepancy or {}).items():
        cols = schemes == method
        if len(pool) and cols.any():
            x[:, cols] *= np.exp(rng.choice(np.asarray(pool, dtype=float), size=(len(x), 1)))
    # an input whose value sits at an end of its range (10 GbE's 9.4 Gb/s is the most TCP carries) pushes
    # every sample one way: the interval still holds the prediction it surrounds
    df["pred_low"] = np.minimum(np.quantile(x, LOW_Q, axis=0), nominal)
    df["pred_high"] = np.maximum(np.quantile(x, HIGH_Q, axis=0), nominal)
    df["pred_samples"] = len(kept)
    return df


def sensitivity(
    models: list, compute: str | None = None, processes: int | None = None, values: dict | None = None, **kw
) -> pd.DataFrame:
    """Each uncertain input moved alone to either end of its range: the relative change of every cell's
    predicted throughput; one row per (input, end) with how many cells it moves by more than 5%, its median
    and largest change and the cell moved most; the inputs that move most cells first."""
    base = predict_curve(models, compute, values, **kw)
    corners = [
        (n, end, {**v, **({} if values is None else {k: values[k] for k in values if k != n})})
        for n, end, v in INPUTS.corners()
    ]
    draws = _map(_throughput, [(models, v, kw) for _, _, v in corners], processes)
    x0 = base["throughput_median"].to_numpy()
    rows = []
    for (name, end, _), x in zip(corners, draws):
        rel = x / x0 - 1
        k = int(np.argmax(np.abs(rel)))
        cell = base.iloc[k]
        rows.append(
            {
                "input": name,
                "end": end,
                "value": INPUTS[name].low if end == "low" else INPUTS[name].high,
                "unit": INPUTS[name].unit,
                "median_change": float(np.median(np.abs(rel))),
                "max_change": float(rel[k]),
                "cells_moved_5pct": int((np.abs(rel) > 0.05).sum()),
                "cells": len(rel),
                "most_moved": f"{cell['workload']} {cell['scheme']} {cell['network']} {int(cell['workers'])} GPUs",
            }
        )
    out = pd.DataFrame(rows)
    out["_reach"] = out["max_change"].abs()
    return out.sort_values(["cells_moved_5pct", "_reach"], ascending=False, ignore_index=True).drop(columns="_reach")


MECHANISMS = {
    # name -> the inputs that switch it off (the model without it: the prediction before it was modelled)
    "ByteScheduler's Python threads and the GIL": {
        "gil_convoy_share": 0.0,
        "bs_task_py_s": 0.0,
        "bs_done_py_s": 0.0,
        "bs_scan_step_s": 0.0,
    },
    "ByteScheduler's forward serialised with the host": {"bs_fwd_gap_s": 0.0},
    "communication and compute sharing the GPU": {"overlap_compute_slowdown": 0.0, "overlap_comm_slowdown": 0.0},
    "BytePS's ZeroMQ van over TCP": {"zmq_van_gbyte_s": 1e9},
    "IPoIB as one TCP stream per ring edge": {"ipoib_gbit_s": 25.0, "ipoib_stream_gbit_s": 20.0},
    "Horovod's negotiation growing with the ring": {"mpi_verbs_message_s": 0.0, "mpi_tcp_message_s": 0.0},
    "each script's own optimizer": {"per_method_optimizer": 0.0},
}
"""The mechanisms of the 2019 stacks this model added (docs/ARCHITECTURE.md, "Predictor"), each with the input
values that take it out again: the IPoIB rates go back to what the model used before (25 and 20 Gbit/s), the
others to nothing at all."""


def _best(df: pd.DataFrame, methods) -> pd.DataFrame:
    s = df[df["scheme"].isin(methods)]
    return s.loc[
        s.groupby(["workload", "network", "workers"])["throughput_median"].idxmax(),
        ["workload", "network", "workers", "scheme"],
    ].set_index(["workload", "network", "workers"])["scheme"]


def mechanism_effects(
    models: list,
    compute: str | None = None,
    processes: int | None = None,
    methods=SEVEN_METHODS,
    values: dict | None = None,
    **kw,
) -> pd.DataFrame:
    """The nominal curve with each mechanism taken out alone (MECHANISMS): per mechanism and size, how many
    (workload, network) rows change their best method, which method gains and which loses most with the
    mechanism in (mean throughput change over the rows), the cell it moves most, and the best methods with
    and without it."""
    v0 = values or INPUTS.nominal()
    base = predict_curve(models, compute, v0, **kw)
    runs = _map(_curve_of, [(models, {**v0, **off}, kw) for off in MECHANISMS.values()], processes)
    best0 = _best(base, methods)
    key = ["workload", "network", "workers", "scheme"]
    rows = []
    for name, without in zip(MECHANISMS, runs):
        best1 = _best(without, methods)
        both = base.merge(without[[*key, "throughput_median"]], on=key, suffixes=("", "_without"))
        both = both[both["scheme"].isin(methods)]
        both["change"] = both["throughput_median"] / both["throughput_median_without"] - 1
        for n in sorted(base["workers"].unique()):
            at = both[both["workers"] == n]
            per = at.groupby("scheme")["change"].mean()
            far = at.loc[at["change"].abs().idxmax()]
            changed = [(k, best1[k], best0[k]) for k in best0.index if k[2] == n and best0[k] != best1[k]]
            rows.append(
                {
                    "mechanism": name,
                    "workers": int(n),
                    "rows": int((best0.index.get_level_values(2) == n).sum()),
                    "winner_changed": len(changed),
                    "gains_most": per.idxmax(),
                    "gains_most_change": float(per.max()),
                    "loses_most": per.idxmin(),
                    "loses_most_change": float(per.min()),
                    "largest_change": float(far["change"]),
                    "largest_cell": f"{far['workload']} {far['scheme']} {far['network']}",
                    "best_without": _tally(best1[best1.index.get_level_values(2) == n]),
                    "best_with": _tally(best0[best0.index.get_level_values(2) == n]),
                    "changed": "; ".join(f"{w} {net}: {a} -> {b}" for (w, net, _), a, b in changed),
                }
            )
    return pd.DataFrame(rows)


def _curve_of(args) -> pd.DataFrame:
    models, values, kw = args
    return predict_curve(models, None, values, **kw)


def _tally(best: pd.Series) -> str:
    counts = best.value_counts()
    return ", ".join(f"{m} {k}" for m, k in counts.items())
