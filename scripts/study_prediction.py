"""The study's 32-GPU comparison, predicted: ResNet-50 / BERT-Base / BERT-Large x the seven methods
(plus DDP and Horovod) x its three networks, on the study's cluster as harness/predict/study_cluster.py
describes it (8 nodes x 4 GeForce GPUs staging through one shared PCIe 3.0 x16 host path, 8 dedicated
parameter-server hosts, TCP's per-message cost on IPoIB and 10 GbE, each method's knobs as the study
set them; the study: Shi et al., IEEE Network 2021).

    python scripts/study_prediction.py --profiles DIR --out reports/study-prediction

DIR holds `profile-<workload>.parquet` from `ddlbench profile` (any batch: per-layer times are scaled
so that one GPU runs the study's batch at the study's single-GPU throughput). Workloads without a
profile fall back to FLOP counts on the study-gpu roofline. Both variants are reported.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import pandas as pd

from harness.atomic import write_parquet_atomic
from harness.predict.compute import compute_model
from harness.predict.predictor import STUDY_METHODS, predict_rows
from harness.predict.profiler import counted_profile
from harness.predict.study_cluster import GPUS_PER_NODE, NODES, SERVER_HOSTS, study_networks
from harness.report.prediction import markdown_table, predicted_bars, save

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


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python scripts/study_prediction.py")
    ap.add_argument("--profiles", type=Path, help="directory with profile-<workload>.parquet")
    ap.add_argument("--out", type=Path, required=True)
    a = ap.parse_args(argv)
    a.out.mkdir(parents=True, exist_ok=True)
    models = {c: compute_models(a.profiles if c == "profile" else None, c) for c in ("profile", "flops")}
    c0 = time.process_time()
    prof, flops = (predict_study(models[c], c) for c in ("profile", "flops"))
    print(f"prediction of both study tables: {time.process_time() - c0:.2f} s CPU")
    write_parquet_atomic(pd.concat([prof, flops], ignore_index=True), a.out / "predictions.parquet")
    save(predicted_bars(prof[prof["scheme"].isin(STUDY_METHODS)], list(STUDY_METHODS),
                        "Predicted throughput, 32 GPUs (8 nodes x 4, PCIe), the study's seven methods"),
         a.out / "study-prediction.png")
    (a.out / "table-profile.md").write_text(markdown_table(prof, list(STUDY_METHODS) + list(EXTRA)) + "\n")
    (a.out / "table-flops.md").write_text(markdown_table(flops, list(STUDY_METHODS) + list(EXTRA)) + "\n")
    print(markdown_table(prof, list(STUDY_METHODS) + list(EXTRA)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
