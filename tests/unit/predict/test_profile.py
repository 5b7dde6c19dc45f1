"""`ddlbench profile`: a real per-layer profile of a tiny model on this CPU, its table's contract, and
the profile -> predict path through the CLI.

    pytest -q tests/unit/predict/test_profile.py      # ~1 min on 2 busy cores
"""

from __future__ import annotations

import time

import pandas as pd
import pytest
import torch
from click.testing import CliRunner

from harness.cli.main import cli
from harness.core.schema import SCHEMA_VERSION
from harness.predict.flop_count import count_costs
from harness.predict.profile_table import PROFILE_COLUMNS
from harness.predict.profiler import measure_profile


@pytest.fixture(scope="module", params=["bert-base-tiny", "resnet50-tiny"])
def measured(request):
    return measure_profile(request.param, batch=2, iters=2, warmup=1)


def test_profile_table_contract(measured):
    df = measured
    assert list(df.columns) == PROFILE_COLUMNS
    assert (df["schema_version"] == SCHEMA_VERSION).all() and (df["source"] == "measured").all()
    assert list(df["param_index"]) == list(range(len(df)))
    assert sorted(df["ready_order"]) == list(range(len(df)))  # a permutation
    assert (df["grad_bytes"] == df["numel"] * 4).all()
    by_ready = df.sort_values("ready_order")
    assert by_ready["ready_s"].is_monotonic_increasing
    assert by_ready["backward_s"].sum() == pytest.approx(by_ready["ready_s"].iloc[-1], rel=1e-9)
    assert by_ready["ready_s"].iloc[-1] <= df["backward_total_s"].iloc[0] * 1.5
    assert (df["forward_s"] >= 0).all() and df["forward_s"].sum() > 0
    assert df["optimizer_s"].sum() > 0
    layers = df.groupby("layer_index")["forward_order"].nunique()
    assert (layers == 1).all()  # one forward position per layer
    assert sorted(df.groupby("layer_index")["forward_order"].first()) == list(range(df["layer_index"].nunique()))


def test_flops_match_the_flop_counter(measured):
    from torch.utils.flop_counter import FlopCounterMode

    from workloads import WORKLOADS

    spec = WORKLOADS.get(measured["workload"].iloc[0])
    seq = None if pd.isna(measured["seq_len"].iloc[0]) else int(measured["seq_len"].iloc[0])
    with torch.device("meta"):
        model = spec.build()
    batch = spec.make_batch(2, seq_len=seq, device="meta", seed=0)
    with FlopCounterMode(display=False) as counter:
        spec.loss(model, batch).backward()
    assert measured["flops"].sum() == pytest.approx(counter.get_total_flops(), rel=1e-9)
    # backward ~ 2x forward (weight and input gradients), less where no input gradient is needed
    assert 1.0 < measured["backward_flops"].sum() / measured["forward_flops"].sum() <= 2.05


def test_counting_sees_the_same_backward_order_as_the_clock():
    counts = count_costs(__import__("workloads").WORKLOADS.get("bert-base-tiny"), 2, 16)
    assert sorted(counts["ready_seq"]) == list(range(len(counts["params"])))
    # the first gradient ready is the output side's (next-sentence head), the word embeddings
    # (tied to the MLM decoder) only at the very end of backward
    names = counts["names"]
    assert names[counts["ready_seq"][0]].startswith("cls.")
    assert names[counts["ready_seq"][-1]] in (
        "bert.embeddings.word_embeddings.weight",
        "bert.embeddings.position_embeddings.weight",
        "bert.embeddings.token_type_embeddings.weight",
    )


def test_profile_then_predict_through_the_cli(tmp_path):
    runner = CliRunner()
    prof = tmp_path / "p.parquet"
    r = runner.invoke(
        cli, ["profile", "bert-base-tiny", "--batch", "2", "--iters", "1", "--warmup", "0", "-o", str(prof)]
    )
    assert r.exit_code == 0, r.output
    assert "wrote" in r.output and prof.exists()
    out = tmp_path / "pred.parquet"
    r = runner.invoke(
        cli,
        [
            "predict",
            "--profile",
            str(prof),
            "--link",
            "eth-10g",
            "--link",
            "ib-100g",
            "--nodes",
            "1,2",
            "--gpus-per-node",
            "2",
            "--schemes",
            "all",
            "--knob",
            "ddp.bucket_cap_mb=1",
            "-o",
            str(out),
        ],
    )
    assert r.exit_code == 0, r.output
    df = pd.read_parquet(out)
    # every scheme with a model (`all`): 2 networks x 2 node counts each
    assert len(df) == 2 * 2 * df["scheme"].nunique() and (df["source"] == "predicted").all()
    assert {"ddp", "mgwfbp", "bytescheduler-ps", "dear", "fsdp"} <= set(df["scheme"])
    assert (df[df["scheme"] == "ddp"]["knob_bucket_cap_mb"] == 1).all()


def test_concurrent_profile_runs_its_load_copies_and_stops_them(tmp_path):
    import multiprocessing

    runner = CliRunner()
    prof = tmp_path / "p2.parquet"
    r = runner.invoke(
        cli,
        [
            "profile",
            "resnet50-tiny",
            "--batch",
            "2",
            "--iters",
            "2",
            "--warmup",
            "1",
            "--concurrent",
            "2",
            "-o",
            str(prof),
        ],
    )
    assert r.exit_code == 0, r.output
    assert "1 more copies computing beside it" in r.output
    df = pd.read_parquet(prof)
    assert (df["concurrent"] == 2).all() and (df["forward_s"] > 0).all()
    assert not multiprocessing.active_children()  # the load copy is gone


def test_predict_a_shaped_testbed_from_its_commbench(tmp_path):
    # a commbench table as `ddlbench commbench --testbed` writes it (sizes past the tbf bucket)
    rows = [
        {
            "collective": "allreduce",
            "workers": 2,
            "size_bytes": size,
            "rep": rep,
            "network": "tb",
            "time_s": 1e-3 + max(0, size - 1e6) * 40e-9,
        }
        for size in [4096 * 4**k for k in range(8)]
        for rep in range(3)
    ]
    cb = tmp_path / "cb.parquet"
    pd.DataFrame(rows).to_parquet(cb)
    prof = tmp_path / "p.parquet"
    assert (
        CliRunner()
        .invoke(cli, ["profile", "resnet50-tiny", "--batch", "2", "--iters", "1", "--warmup", "0", "-o", str(prof)])
        .exit_code
        == 0
    )
    out = tmp_path / "pred.parquet"
    r = CliRunner().invoke(
        cli,
        [
            "predict",
            "--profile",
            str(prof),
            "--commbench",
            str(cb),
            "--testbed-shaping",
            "--label",
            "tb",
            "--nodes",
            "2",
            "--workers-per-node",
            "1",
            "--servers",
            "1",
            "--server-hosts",
            "colocated",
            "--schemes",
            "study",
            "-o",
            str(out),
        ],
    )
    assert r.exit_code == 0, r.output
    df = pd.read_parquet(out)
    assert sorted(df["scheme"]) == sorted(
        ["bsp-a2a", "wfbp-a2a", "mgwfbp", "bytescheduler-a2a", "bsp-ps", "wfbp-ps", "bytescheduler-ps"]
    )
    assert (df["network"] == "tb").all() and (df["network_rate_mbit"].round() == 200).all()


@pytest.mark.parametrize(
    "args, words",
    [
        (["predict"], "nothing to predict"),
        (["predict", "--workload", "bert-base", "--device-preset", "study-gpu", "--testbed-shaping"], "--commbench"),
        (["predict", "--workload", "bert-base"], "--device-preset"),
        (["predict", "--workload", "gpt2-small", "--device-preset", "study-gpu"], "no measured throughput"),
        (
            ["predict", "--workload", "bert-base", "--device-preset", "study-gpu", "--link", "carrier-pigeon"],
            "unknown network preset",
        ),
        (
            ["predict", "--workload", "bert-base", "--device-preset", "study-gpu", "--schemes", "magic"],
            "unknown method",
        ),
        (["predict", "--workload", "bert-base", "--device-preset", "study-gpu", "--nodes", "0"], "--nodes"),
        (["predict", "--profile", "/nonexistent.parquet"], "does not exist"),
        (["profile", "no-such-model"], "unknown workload"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args, words):
    r = CliRunner().invoke(cli, args)
    assert r.exit_code == 2, r.output
    assert words in r.output and "Traceback" not in r.output


# --- totals from the harness's loop, shares from the hooks (harness/predict/profiler.py) -----------------------
def test_scaled_keeps_each_layers_share_and_the_loops_totals():
    from harness.predict.profiler import scaled

    hooked = {
        "layer_forward_s": [0.02, 0.06],
        "ready_s": [0.03, 0.09, 0.12],
        "backward_total_s": 0.12,
        "optimizer_s": 0.01,
        "forward_order": [0, 1],
    }
    out = scaled(hooked, {"forward_s": 0.04, "backward_s": 0.06, "optimizer_s": 0.004})
    assert out["layer_forward_s"] == pytest.approx([0.01, 0.03]) and sum(out["layer_forward_s"]) == pytest.approx(0.04)
    assert out["ready_s"] == pytest.approx([0.015, 0.045, 0.06]) and out["backward_total_s"] == pytest.approx(0.06)
    assert out["optimizer_s"] == 0.004 and out["forward_order"] == [0, 1]


def test_host_time_in_the_layer_hooks_is_not_charged_to_the_profile(monkeypatch):
    """The GPU finding (reports/gpu/2026-11-26-h200-after: hooks doubled bert-large's profiled iteration) made
    visible on the CPU: every forward hook sleeps 5 ms, as host work a GPU would wait for. The profile's total
    is the hook-free loop's, far below what the hooked pass saw."""
    from harness.predict import profiler

    class SlowHooks(profiler.LayerHooks):
        def __setattr__(self, name, value):
            if name == "on_layer":
                inner = value

                def value(j):  # a pre-hook returns None, or it would replace the layer's inputs
                    time.sleep(0.005)
                    inner(j)

            super().__setattr__(name, value)

    seen = {}
    real = profiler.time_iterations

    def spy(*a, **k):
        seen.update(real(*a, **k))
        return dict(seen)

    monkeypatch.setattr(profiler, "LayerHooks", SlowHooks)
    monkeypatch.setattr(profiler, "time_iterations", spy)
    df = measure_profile("bert-base-tiny", batch=2, seq_len=16, iters=2, warmup=1)
    layers = df["layer_index"].nunique()
    hooked_forward = sum(seen["layer_forward_s"])
    assert hooked_forward >= 0.005 * layers, "the hooks slept in the hooked pass"
    assert df["forward_s"].sum() < hooked_forward - 0.004 * layers, (df["forward_s"].sum(), hooked_forward)
    by_layer = df.groupby("layer_index")["forward_s"].sum()
    shares = [t / hooked_forward for t in seen["layer_forward_s"]]
    assert list(by_layer / by_layer.sum()) == pytest.approx(shares, rel=1e-6), "each layer keeps its share"
