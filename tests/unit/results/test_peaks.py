"""MFU and the host-bound mark (docs/ARCHITECTURE.md, "Host-bound cells and MFU"): the peak table by device
and dtype, its refusals, and the mark from a cell's own device lag and iteration, as a summary row shows them."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from harness.contracts.cell import CellSpec
from harness.report.tables import HOST_MARK, HOST_WHY, summary_table
from harness.results import summarize
from harness.results.peaks import PEAKS, ImpossibleMFU, mfu, peak_tflops, single_model


@pytest.mark.parametrize(
    "name,dtype,tflops",
    [
        ("NVIDIA H200", "bf16", 989.4),
        ("NVIDIA H100 80GB HBM3", "bf16", 989.4),
        ("NVIDIA H100 PCIe", "bf16", 756.0),
        ("NVIDIA H100 NVL", "fp32", 60.0),
        ("NVIDIA A100-SXM4-80GB", "fp32", 19.5),
        ("NVIDIA L40S", "bf16", 362.0),
        ("NVIDIA L4", "bf16", 121.0),
        ("NVIDIA GeForce RTX 2080 Ti", "fp32", 13.4),
    ],
)
def test_peaks_by_device_and_dtype(name, dtype, tflops):
    assert peak_tflops(name, dtype) == tflops


def test_unknown_device_or_dtype_gets_no_mfu():
    assert peak_tflops("NVIDIA Quantum X9000", "bf16") is None
    assert mfu(4.2e10, 1000.0, "NVIDIA Quantum X9000", "bf16") is None
    assert mfu(4.2e10, 100.0, "NVIDIA GeForce RTX 2080 Ti", "bf16") is None, "Turing has no bf16"
    assert mfu(None, 100.0, "NVIDIA H200", "bf16") is None and mfu(math.nan, 100.0, "NVIDIA H200", "bf16") is None
    assert all(p.source for p in PEAKS), "every peak says where it comes from"


def test_mfu_of_the_first_gpu_runs_bf16_bert_base_row():
    """bert-base bf16 on an H200 (reports/gpu/2026-11-26-h200): 2610 samples/s x 42.4 GFLOP per sample."""
    assert mfu(42376504320.0, 2610.1, "NVIDIA H200", "bf16") == pytest.approx(0.1118, abs=1e-3)


def test_mfu_above_100_percent_is_refused_and_the_row_says_so():
    with pytest.raises(ImpossibleMFU, match="above 100%"):
        mfu(42376504320.0, 26101.0, "NVIDIA H200", "bf16")
    value, why = summarize.device_utilisation(42376504320.0, 26101.0, "NVIDIA H200", "bf16")
    assert value is None and "MFU 112%" in why


def test_mixed_or_cpu_cells_have_no_single_model():
    assert single_model("2 x NVIDIA H200") == "NVIDIA H200"
    assert single_model("1 x NVIDIA H200; 1 x NVIDIA H100 PCIe") == ""
    assert single_model("") == ""


# The cells measured on one H200 (/work runs of 2026-11-26, README "GPUs"): (median device lag, median iteration)
# of the harness's `local` cell, and whether its pace was the host's (it moved with the host between rounds,
# iteration to iteration, or both) or the GPU's (steady to 0.1-0.4%, harness/bare inside [0.995, 1.03]).
@pytest.mark.parametrize(
    "case,lag,it,bound",
    [
        ("gpt2-small bf16: 3.1 ms of 37.5 ms, iteration CV 0.087", 0.0031, 0.0375, True),
        ("bert-base bf16: 0.05 ms, 28-41 ms per iteration", 0.000053, 0.0345, True),
        ("bert-large fp32: 0.43 ms, bare rounds 46% apart", 0.00043, 0.0518, True),
        ("bert-large bf16: 1.5 ms of 41 ms", 0.0015, 0.0412, True),
        ("resnet50 bf16: 0.995 of an iteration, harness/bare 1.007", 0.02834, 0.02847, False),
        ("bert-base fp32: 1.10 iterations, harness/bare 1.003", 0.0737, 0.0673, False),
        ("resnet50 fp32: 1.68 iterations, harness/bare 1.000", 0.1292, 0.0768, False),
        ("one iteration exactly", 0.0400, 0.0400, False),
        ("just under half an iteration", 0.0199, 0.0400, True),
    ],
)
def test_host_bound_on_the_measured_cases(case, lag, it, bound):
    assert summarize.host_bound("cuda", lag, it) is bound, case


@pytest.mark.parametrize("device,lag,it", [("cpu", 0.0, 0.0245), ("cuda", math.nan, 0.0245)])
def test_no_host_bound_mark_on_a_cpu_or_without_a_device_lag(device, lag, it):
    assert summarize.host_bound(device, lag, it) is None


def test_a_row_from_before_the_column_gets_the_same_rule():
    """Rows stored with `launch_bound` (the old, narrower mark that missed gpt2-small bf16) are judged by
    their own device lag and iteration; a row with `host_bound` keeps it."""
    old = {"device": "cuda", "launch_bound": False, "device_lag_s": 0.0031, "iter_s_median": 0.0375}
    assert summarize.row_host_bound(old) is True
    assert summarize.row_host_bound({**old, "host_bound": False}) is False
    assert summarize.row_host_bound({"device": "cpu", "device_lag_s": None, "iter_s_median": 0.2}) is None


def test_a_gpu_summary_row_carries_mfu_and_the_mark_and_the_table_shows_them():
    """A one-worker CUDA result shaped as the worker writes it (host-bound: the device reached each iteration
    as the host issued it) becomes a row with `host_bound`, `mfu`,
    `host_issue_s`, and the printed table marks it and explains it."""
    cell = CellSpec(
        workload="bert-base", scheme="local", workers=1, device="cuda", dtype="bf16", batch=64, seq_len=64
    )  # as resolve() makes it on a GPU machine (here it refuses cuda)
    samples = [
        {
            "iteration": i,
            "iter_s": 0.0245,
            "forward_s": 0.008,
            "forward_wait_s": 0.0,
            "backward_s": 0.015,
            "comm_wait_s": 0.0,
            "optimizer_s": 0.0015,
            "host_issue_s": 0.0244,
            "device_lag_s": 1e-5,
        }
        for i in range(30)
    ]
    result = {
        "cell": {},
        "ranks": [{"rank": 0, "samples": samples, "device_name": "NVIDIA H200"}],
        "facts": {
            "flops_per_sample": 42376504320.0,
            "gpu_models": "1 x NVIDIA H200",
            "params": 1,
            "grad_bytes": 1,
            "comm_bytes_per_iter": 0,
        },
        "plan": {},
        "dist": {"nodes": 1},
    }
    row = summarize.summary_row("r", cell, result, "sequence", 3.0)
    assert row["host_bound"] is True and row["host_issue_s"] == pytest.approx(0.0244)
    assert row["mfu"] == pytest.approx(42376504320.0 * 64 / 0.0245 / 989.4e12)
    assert row["device_peak_tflops"] == 989.4
    df, caption = summary_table(pd.DataFrame([row]))
    assert df["X/s (±95% CI)"].iloc[0].endswith(HOST_MARK) and df["MFU"].iloc[0] == "11%"
    assert HOST_WHY in caption
