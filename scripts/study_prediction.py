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

from harness.core.atomic import write_parquet_atomic
from harness.predict.predictor import STUDY_METHODS
from harness.predict.study import (
    EXTRA,
    compute_models,
    predict_study,
)
from harness.report.prediction import markdown_table, predicted_bars, save


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
