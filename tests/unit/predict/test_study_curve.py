"""The study's whole scaling curve (harness/predict/study.py, study_cluster.py, study_inputs.py) and the models
under it (harness/sim/byteps.py, bytescheduler.py, bucketed.py with a software stack): every input sourced and
ranged, all four sizes predicted with ordered intervals, BytePS without servers on one node, ByteScheduler's
units, the authors' MG-WFBP merge rule, the same model behind `ddlbench predict --network study-*`.

    pytest -q tests/unit/predict/test_study_curve.py -s      # -s prints the curve's CPU time
"""

from __future__ import annotations

import math
import time

import pandas as pd
import pytest
from click.testing import CliRunner

from harness.cli.main import cli
from harness.contracts.planning import MB
from harness.predict import study
from harness.predict.inputs import KINDS, Input, Inputs
from harness.predict.predictor import STUDY_METHODS, simulate
from harness.predict.study_cluster import FAMILIES, MGWFBP_TABLES, NODE_COUNTS, study_network
from harness.predict.study_inputs import INPUTS
from harness.report.study_curve import best_methods, findings, interval_summary, size_table
from harness.sim.byteps import declared_order, djb2, server_of
from harness.sim.bucketed import study_merge
from harness.sim.network import Cluster, Link

NOMINAL = INPUTS.nominal()


@pytest.fixture(scope="module")
def models():
    return study.compute_models(None, "flops")


@pytest.fixture(scope="module")
def curve(models):
    c0 = time.process_time()
    df = study.with_intervals(models, "flops", samples=4, processes=1)
    print(f"\nstudy curve with 4 samples: {len(df)} cells in {time.process_time() - c0:.1f} s CPU")
    return df


# --- inputs ------------------------------------------------------------------------------------------------

def test_every_input_states_its_source_range_and_kind():
    """No input lacks a source line, a range holding its value, a unit and a kind; code and measured inputs
    name where (a path, a command), and an exactly known one has a zero-width range."""
    assert len(list(INPUTS)) >= 30
    for i in INPUTS:
        assert i.source.strip() and i.what.strip() and i.unit.strip(), i.name
        assert i.low <= i.value <= i.high and i.low >= 0, i.name
        assert i.kind in KINDS, i.name
        if i.kind == "measured":
            assert "`" in i.source, f"{i.name}: a measurement names its command"
        if i.kind == "code":
            assert any(t in i.source for t in (".cc", ".py", ".sh", ".h", "docs/")), f"{i.name}: names its code path"
    assert INPUTS["bs_partition_elems"].fixed and INPUTS["byteps_partition_bytes"].fixed  # the study set them
    assert not INPUTS["shm_edge_gbyte_s"].fixed and not INPUTS["server_sum_gbyte_s"].fixed


def test_an_input_without_a_source_or_outside_its_range_is_refused():
    with pytest.raises(ValueError, match="where it comes from"):
        Input("x", 1.0, 0.5, 2.0, "s", "a cost", " ")
    with pytest.raises(ValueError, match="outside its range"):
        Input("x", 3.0, 0.5, 2.0, "s", "a cost", "a source")
    with pytest.raises(ValueError, match="named twice"):
        Inputs([Input("x", 1.0, 1.0, 1.0, "s", "a", "b"), Input("x", 1.0, 1.0, 1.0, "s", "a", "b")])


def test_latin_hypercube_samples_cover_each_range_once_per_stratum():
    inputs = Inputs([Input("a", 2.5, 2.0, 3.0, "s", "a", "src"), Input("b", 10.0, 1.0, 100.0, "s", "b", "src"),
                     Input("c", 5.0, 5.0, 5.0, "s", "c", "src")])
    s = inputs.samples(10, seed=3)
    a = sorted(v["a"] for v in s)
    assert all(2.0 + k * 0.1 <= x <= 2.0 + (k + 1) * 0.1 for k, x in enumerate(a))  # one draw per stratum
    b = sorted(math.log10(v["b"]) for v in s)  # 100x range: log-uniform
    assert all(k * 0.2 <= x <= (k + 1) * 0.2 for k, x in enumerate(b))
    assert {v["c"] for v in s} == {5.0}
    assert inputs.samples(10, seed=3) == s  # reproducible
    assert [(n, e) for n, e, _ in inputs.corners()] == [("a", "low"), ("a", "high"), ("b", "low"), ("b", "high")]


# --- the curve ---------------------------------------------------------------------------------------------

def test_the_curve_has_every_size_network_and_method_with_ordered_intervals(curve):
    assert set(curve["workers"]) == {4, 8, 16, 32} == {4 * n for n in NODE_COUNTS}
    assert set(curve["network"]) == set(FAMILIES)
    assert set(curve["scheme"]) >= set(STUDY_METHODS)
    assert len(curve) == 3 * 3 * 4 * (len(STUDY_METHODS) + len(study.EXTRA))
    assert curve[["throughput_median", "pred_low", "pred_high"]].map(math.isfinite).all().all()
    assert (curve["pred_low"] <= curve["throughput_median"] + 1e-9).all()
    assert (curve["throughput_median"] <= curve["pred_high"] + 1e-9).all()
    assert (curve["pred_high"] > curve["pred_low"]).mean() > 0.9  # uncertain inputs move nearly every cell
    ps = curve[curve["scheme"].str.endswith("-ps")]
    assert (ps["servers"] == ps["nodes"]).all()  # one dedicated server host per worker node


def test_one_node_is_the_same_on_every_network(curve):
    """At 4 GPUs nothing crosses a NIC: the three networks predict alike (BytePS runs no server there)."""
    one = curve[curve["workers"] == 4].pivot_table(index=["workload", "scheme"], columns="network",
                                                   values="throughput_median")
    assert (one.max(axis=1) / one.min(axis=1) - 1 < 1e-9).all()


def test_the_report_answers_from_the_prediction(curve):
    best = best_methods(curve, list(STUDY_METHODS))
    assert len(best) == 3 * 3 * 4
    assert (best["margin"] >= 0).all()
    found = findings(curve, list(STUDY_METHODS))
    assert any(f.startswith("At 32 GPUs the predicted best method") for f in found)
    assert any("bert-large on one node (4 GPUs): speed-up over one GPU" in f for f in found)
    table = size_table(curve, 16, list(STUDY_METHODS))
    assert table.count("\n") == 1 + 9 and "**" in table and "[" in table
    w = interval_summary(curve)
    assert 0 < w["median"] <= w["p90"] <= w["max"]


def test_sensitivity_names_what_moves_the_cells(models):
    bert = [m for m in models if m.workload == "bert-base"]
    sens = study.sensitivity(bert, "flops", node_counts=(1, 2), processes=1)
    assert set(sens["input"]) == {i.name for i in INPUTS.uncertain()}
    assert len(sens) == 2 * len(INPUTS.uncertain())
    top = sens.iloc[0]
    assert top["median_change"] > 0 and top["cells_moved_5pct"] > 0
    # the intra-node rate moves every one-node cell; the 10 GbE rate none of them
    shm = sens[(sens["input"] == "shm_edge_gbyte_s") & (sens["end"] == "low")].iloc[0]
    assert shm["cells_moved_5pct"] > 0


# --- the models under it -----------------------------------------------------------------------------------

def test_byteps_on_one_node_has_no_server_and_moves_no_byte_over_the_nic(models):
    sn = study_network(NOMINAL, "eth-10g", 1)
    bert = next(m for m in models if m.workload == "bert-base")
    cl = Cluster(1, 4, sn.network.inter, sn.network.intra, 1).with_(stack=sn.network.stacks["bsp-ps"])
    out = simulate("bsp-ps", bert, cl, sn.knobs["bsp-ps"])
    assert out.plan["engine"] == "byteps" and out.plan["servers"] == 0
    eight = study_network(NOMINAL, "eth-10g", 8)
    cl8 = Cluster(8, 4, eight.network.inter, eight.network.intra, 8).with_(stack=eight.network.stacks["bsp-ps"])
    out8 = simulate("bsp-ps", bert, cl8, eight.knobs["bsp-ps"])
    assert out8.plan["servers"] == 8 and sum(out8.plan["server_keys"]) == out8.plan["partitions"]
    # 4,096,000-byte partitions of the one fused tensor
    assert out8.plan["partitions"] == math.ceil(bert.total_grad_bytes / 4096000)


def test_byteps_maps_keys_to_servers_by_djb2_of_the_declared_key():
    assert djb2("") == 5381 and djb2("a") == 5381 * 33 + 97
    key = (3 << 16) + 2
    assert server_of(key, 8) == djb2(str(key)) % 8
    assert declared_order(("b.weight", "a.weight", "c.bias"), 3) == [1, 0, 2]  # sorted "Gradient."+name


def test_bytescheduler_counts_parameters_not_bytes():
    """The study's BYTESCHEDULER_PARTITION=4000000 and CREDIT=16000000 are parameters: 16 MB and 64 MB."""
    k = study_network(NOMINAL, "ib-100g", 8).knobs["bytescheduler-a2a"]
    assert k["partition_mb"] * MB == pytest.approx(16e6) and k["credit_mb"] * MB == pytest.approx(64e6)
    assert study_network(NOMINAL, "ib-100g", 8).knobs["bsp-ps"]["partition_mb"] * MB == pytest.approx(4096000)


def test_the_bytescheduler_poller_holding_the_gil_stops_the_next_forward(models):
    """With the library's Python poller spinning over in-flight handles, the next forward cannot overlap
    the previous round's all-reduces: never faster than without it."""
    from dataclasses import replace

    sn = study_network(NOMINAL, "eth-10g", 8)
    st = sn.network.stacks["bytescheduler-a2a"]
    assert st.poller_holds_gil_s == pytest.approx(NOMINAL["py_switch_interval_s"] / 2)
    bert = next(m for m in models if m.workload == "bert-large")
    cl = Cluster(8, 4, sn.network.inter, sn.network.intra, 8, measured=sn.network.measured)
    held = simulate("bytescheduler-a2a", bert, cl.with_(stack=st), sn.knobs["bytescheduler-a2a"]).iter_s
    free = simulate("bytescheduler-a2a", bert, cl.with_(stack=replace(st, poller_holds_gil_s=0.0)),
                    sn.knobs["bytescheduler-a2a"]).iter_s
    assert held >= free


def test_the_authors_mgwfbp_rule_merges_tiny_tensors_and_uses_their_table():
    """_generate_groups_mgwfbp: a tensor under 8192 elements always merges into its neighbour group; the
    alpha/beta come from the hard-coded table for the worker count (56 Gb table on IB and IPoIB)."""
    deltas = [0.001] * 6
    numels = [1_000_000, 100, 1_000_000, 100, 100, 1_000_000]
    groups = study_merge(deltas, numels, 1e-9, 1e-12)
    merged = [len(g) for g in groups]
    assert sum(merged) == 6 and len(groups) < 6  # the 100-element tensors did not go alone
    for g in groups:
        assert not (len(g) == 1 and numels[g[0]] < 8192)
    for nodes in NODE_COUNTS:
        alpha, beta = MGWFBP_TABLES["56g"][4 * nodes]
        k = study_network(NOMINAL, "ipoib-100g", nodes).knobs["mgwfbp"]
        assert k["alpha_s"] == alpha and k["beta_s_per_mb"] == pytest.approx(beta * MB)


def test_a_slower_shared_host_path_slows_every_multi_node_method(models):
    bert = next(m for m in models if m.workload == "bert-base")
    fast = study.predict_curve([bert], "flops", node_counts=(4,), families=("ib-100g",))
    slow = study.predict_curve([bert], "flops", {**NOMINAL, "host_path_gbyte_s": 12.0}, node_counts=(4,),
                               families=("ib-100g",))
    f = fast.set_index("scheme")["throughput_median"]
    s = slow.set_index("scheme")["throughput_median"]
    for m in ("bsp-a2a", "wfbp-a2a", "bsp-ps", "wfbp-ps"):
        assert s[m] < f[m], m


# --- one model behind the CLI ------------------------------------------------------------------------------

def test_ddlbench_predict_runs_the_study_cluster_with_intervals(tmp_path, models):
    out = tmp_path / "p.parquet"
    r = CliRunner().invoke(cli, ["predict", "--workload", "bert-base", "--device-preset", "study-gpu",
                                 "--compute", "flops", "--network", "study-eth-10g", "--nodes", "1,2",
                                 "--schemes", "bsp-a2a,wfbp-ps", "--intervals", "3", "-o", str(out)])
    assert r.exit_code == 0, r.output
    df = pd.read_parquet(out)
    assert set(df["workers"]) == {4, 8} and set(df["network"]) == {"eth-10g"} and len(df) == 4
    assert (df["pred_low"] <= df["throughput_median"]).all() and (df["throughput_median"] <= df["pred_high"]).all()
    bert = next(m for m in models if m.workload == "bert-base")
    same = study.predict_curve([bert], None, node_counts=(1, 2), families=("eth-10g",),
                               methods=["bsp-a2a", "wfbp-ps"])
    a = df.set_index(["workers", "scheme"])["throughput_median"].sort_index()
    b = same.set_index(["workers", "scheme"])["throughput_median"].sort_index()
    assert list(a.round(6)) == list(b.round(6))  # the study script's model, not a copy


@pytest.mark.parametrize("args, needle", [
    (["--network", "study-eth-1g"], "the study's cluster has networks"),
    (["--network", "study-ib-100g", "--nodes", "3"], "no entry for 12 workers"),
    (["--network", "study-ib-100g", "--gpus-per-node", "8"], "hold 4 GPUs"),
    (["--network", "ib-100g", "--intervals", "4"], "--intervals needs input ranges"),
])
def test_ddlbench_predict_refuses_study_misuse_in_one_line(args, needle):
    r = CliRunner().invoke(cli, ["predict", "--workload", "bert-base", "--device-preset", "study-gpu", *args])
    assert r.exit_code == 2, r.output
    assert needle in r.output and len(r.output.strip().splitlines()) == 1, r.output


def test_the_nccl_ring_at_one_node_is_bounded_by_the_slower_of_shm_and_the_host_path():
    from harness.predict.study_cluster import links, nccl_allreduce

    v = dict(NOMINAL)
    inter, intra = links(v, "ib-100g")
    ab = nccl_allreduce(v, inter, intra, 1)
    edge = min(v["shm_edge_gbyte_s"], v["host_path_gbyte_s"] / 4) * 1e9
    assert ab.beta_s_per_byte == pytest.approx(2 * 3 / 4 / edge, rel=1e-6)
    ab8 = nccl_allreduce(v, inter, intra, 8)
    edge8 = min(v["shm_edge_gbyte_s"], v["ib_gbyte_s"], v["host_path_gbyte_s"] / 5) * 1e9
    assert ab8.beta_s_per_byte == pytest.approx(2 * 31 / 32 / edge8, rel=1e-6)
    assert isinstance(intra, Link)
