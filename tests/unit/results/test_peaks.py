"""MFU and the launch-bound mark (docs/ARCHITECTURE.md, "Launch-bound cells and MFU"): the peak table by device
and dtype, its refusals, and the mark from a cell's own host and device times, as a summary row shows them."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from harness.contracts.cell import CellSpec
from harness.report.tables import LAUNCH_MARK, LAUNCH_WHY, summary_table
from harness.results import summarize
from harness.results.peaks import PEAKS, ImpossibleMFU, mfu, peak_tflops, single_model


@pytest.mark.parametrize("name,dtype,tflops", [
    ("NVIDIA H200", "bf16", 989.4), ("NVIDIA H100 80GB HBM3", "bf16", 989.4), ("NVIDIA H100 PCIe", "bf16", 756.0),
    ("NVIDIA H100 NVL", "fp32", 60.0), ("NVIDIA A100-SXM4-80GB", "fp32", 19.5), ("NVIDIA L40S", "bf16", 362.0),
    ("NVIDIA L4", "bf16", 121.0), ("NVIDIA GeForce RTX 2080 Ti", "fp32", 13.4)])
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


@pytest.mark.parametrize("device,host,lag,it,bound", [
    ("cuda", 0.0240, 0.00001, 0.0245, True),    # the device reaches each iteration as the host issues it
    ("cuda", 0.0240, 0.0200, 0.0245, False),    # the host runs ahead (blocked in launches): GPU-bound
    ("cuda", 0.0100, 0.00001, 0.0245, False),   # the host issues in 10 ms of 24.5: the GPU sets the pace
    ("cpu", 0.0240, 0.0, 0.0245, None),         # the host is the device
    ("cuda", math.nan, math.nan, 0.0245, None)])  # a run from before the host's times were recorded
def test_launch_bound_mark(device, host, lag, it, bound):
    assert summarize.launch_bound(device, host, lag, it) is bound


def test_a_gpu_summary_row_carries_mfu_and_the_mark_and_the_table_shows_them():
    """A one-worker CUDA result shaped as the worker writes it (launch-bound: the host issued each iteration
    in the iteration's time and the device reached it at once) becomes a row with `launch_bound`, `mfu`,
    `host_issue_s`, and the printed table marks it and explains it."""
    cell = CellSpec(workload="bert-base", scheme="local", workers=1, device="cuda", dtype="bf16", batch=64,
                    seq_len=64)  # as resolve() makes it on a GPU machine (here it refuses cuda)
    samples = [{"iteration": i, "iter_s": 0.0245, "forward_s": 0.008, "forward_wait_s": 0.0, "backward_s": 0.015,
                "comm_wait_s": 0.0, "optimizer_s": 0.0015, "host_issue_s": 0.0244, "device_lag_s": 1e-5}
               for i in range(30)]
    result = {"cell": {}, "ranks": [{"rank": 0, "samples": samples, "device_name": "NVIDIA H200"}],
              "facts": {"flops_per_sample": 42376504320.0, "gpu_models": "1 x NVIDIA H200", "params": 1,
                        "grad_bytes": 1, "comm_bytes_per_iter": 0}, "plan": {}, "dist": {"nodes": 1}}
    row = summarize.summary_row("r", cell, result, "sequence", 3.0)
    assert row["launch_bound"] is True and row["host_issue_s"] == pytest.approx(0.0244)
    assert row["mfu"] == pytest.approx(42376504320.0 * 64 / 0.0245 / 989.4e12)
    assert row["device_peak_tflops"] == 989.4
    df, caption = summary_table(pd.DataFrame([row]))
    assert df["X/s (±95% CI)"].iloc[0].endswith(LAUNCH_MARK) and df["MFU"].iloc[0] == "11%"
    assert LAUNCH_WHY in caption
