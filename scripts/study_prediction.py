"""The study's 32-GPU comparison, predicted: ResNet-50 / BERT-Base / BERT-Large x the seven methods
(plus DDP and Horovod) x its three networks, on 8 nodes x 4 GPUs (PCIe 3.0 x16 inside a node), one
parameter-server host per worker node (the study's testbed: Shi et al., IEEE Network 2021).

    python scripts/study_prediction.py --profiles DIR --out reports/study-prediction

DIR holds `profile-<workload>.parquet` from `ddlbench profile` (any batch: per-layer times are scaled
so that one GPU runs the study's batch at the study's single-GPU throughput). Workloads without a
profile fall back to FLOP counts on the study-gpu roofline. Both variants are reported.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

from harness.atomic import write_parquet_atomic
from harness.predict.compute import compute_model
from harness.predict.network import get_link
from harness.predict.predictor import STUDY_METHODS, Network, predict_rows
from harness.predict.profiler import counted_profile
from harness.report.prediction import markdown_table, predicted_bars, save

WORKLOADS = ("resnet50", "bert-base", "bert-large")
NETWORKS = ("ib-100g", "ipoib-100g", "eth-10g")
NODES, GPUS_PER_NODE = 8, 4
EXTRA = ("ddp", "horovod")


def study_rows(profiles: Path | None, compute: str) -> pd.DataFrame:
    """compute: `profile` (measured CPU layer profile, calibrated) or `flops` (roofline, calibrated)."""
    models = []
    for wl in WORKLOADS:
        f = profiles / f"profile-{wl}.parquet" if profiles else None
        if compute == "profile" and f is not None and f.exists():
            table = pd.read_parquet(f)
        else:
            table = counted_profile(wl)
        models.append(compute_model(table, "study-gpu", mode=compute))
    nets = [Network(n, get_link(n), get_link("pcie3-x16")) for n in NETWORKS]
    df = predict_rows(models, nets, [NODES], GPUS_PER_NODE, list(STUDY_METHODS) + list(EXTRA),
                      servers=NODES, run_id=f"study-prediction-{compute}")
    df["compute_source"] = compute
    return df


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python scripts/study_prediction.py")
    ap.add_argument("--profiles", type=Path, help="directory with profile-<workload>.parquet")
    ap.add_argument("--out", type=Path, required=True)
    a = ap.parse_args(argv)
    a.out.mkdir(parents=True, exist_ok=True)
    prof = study_rows(a.profiles, "profile")
    flops = study_rows(None, "flops")
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
