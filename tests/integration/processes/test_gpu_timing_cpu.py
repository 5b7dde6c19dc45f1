"""harness/doctor/gpu_timing.py's logic on the CPU (the GPU module's timing part, README "GPUs"): one process times
the bare loop and its variants in two interleaved rounds around one real harness sweep, counts operations per
iteration, profiles, and writes the verdict table; on a GPU the same run checks harness / bare against
[0.995, 1.03]. Here the bounds are off (a CPU rank runs on one thread, the bare loop on all of them)."""

from __future__ import annotations

import pandas as pd
import pytest

from harness.doctor import gpu_timing, paired

pytestmark = pytest.mark.slow


def test_gpu_timing_runs_its_rounds_and_writes_the_verdicts(tmp_path):
    code = gpu_timing.main([str(tmp_path), "--device", "cpu", "--workloads", "bert-base-tiny", "--dtypes", "fp32",
                            "--warmup", "1", "--iters", "3", "--no-bounds", "--paired", "all"])
    assert code == 0
    variants = pd.read_csv(tmp_path / "variants.csv")
    assert list(variants["round"].unique()) == ["A", "B"]
    assert set(variants["variant"]) == set(gpu_timing.VARIANTS)
    first = variants[variants["round"] == "A"]["variant"].tolist()
    assert variants[variants["round"] == "B"]["variant"].tolist() == first[::-1], "round B runs in reverse"
    assert (variants["per_s"] > 0).all()
    table = pd.read_csv(tmp_path / "throughput.csv")
    row = table.iloc[0]
    assert row["harness_per_s"] > 0 and row["ratio"] == pytest.approx(
        row["harness_per_s"] / ((row["bare_before_per_s"] + row["bare_after_per_s"]) / 2))
    assert pd.isna(row["launch_bound"]) and pd.isna(row["mfu"]), "no launch-bound mark or MFU on a CPU"
    assert row["verdict"] == "recorded" and row["ok"], "--no-bounds records, never judges"
    pairs = pd.read_csv(tmp_path / "pairs.csv")
    assert pairs["first"].tolist() == ["bare", "harness"] * (paired.PAIRS // 2), "pairs alternate their order"
    assert (pairs["ratio"] > 0).all() and row["paired_ratio"] == pytest.approx(pairs["ratio"].median())
    assert pd.read_csv(tmp_path / "kernels.csv")["cpu_ops_per_iter"].iloc[0] > 0
    assert (tmp_path / "profiles" / "profile-bert-base-tiny.parquet").exists()
    assert "parts_s" in (tmp_path / "host.json").read_text()
