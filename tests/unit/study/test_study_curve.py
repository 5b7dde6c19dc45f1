"""The study's whole scaling curve (harness/study/curve.py, study_cluster.py, study_inputs.py) and the models
under it (harness/sim/byteps.py, bytescheduler.py, bucketed.py with a software stack): every input sourced and
ranged, all four sizes predicted with ordered intervals, BytePS without servers on one node, ByteScheduler's
units, the authors' MG-WFBP merge rule, the same model behind `ddlbench predict --cluster study-*`.

    pytest -q tests/unit/predict/test_study_curve.py -s      # -s prints the curve's CPU time
"""

from __future__ import annotations

import math
import time

import pandas as pd
import pytest
from click.testing import CliRunner

from harness.cli.main import cli
from harness.grouping.cost import MB
from harness.predict.inputs import KINDS, Input, Inputs
from harness.predict.predictor import SEVEN_METHODS, simulate
from harness.sim.byteps import declared_order, djb2, server_of
from harness.sim.links import Cluster, Link
from harness.study import curve as study
from harness.study.cluster import FAMILIES, MGWFBP_TABLES, NODE_COUNTS, study_network
from harness.study.inputs import INPUTS
from harness.study.mgwfbp import study_merge

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
    inputs = Inputs(
        [
            Input("a", 2.5, 2.0, 3.0, "s", "a", "src"),
            Input("b", 10.0, 1.0, 100.0, "s", "b", "src"),
            Input("c", 5.0, 5.0, 5.0, "s", "c", "src"),
        ]
    )
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
    assert set(curve["scheme"]) >= set(SEVEN_METHODS)
    assert len(curve) == 3 * 3 * 4 * (len(SEVEN_METHODS) + len(study.EXTRA))
    assert curve[["throughput_median", "pred_low", "pred_high"]].map(math.isfinite).all().all()
    assert (curve["pred_low"] <= curve["throughput_median"] + 1e-9).all()
    assert (curve["throughput_median"] <= curve["pred_high"] + 1e-9).all()
    assert (curve["pred_high"] > curve["pred_low"]).mean() > 0.9  # uncertain inputs move nearly every cell
    ps = curve[curve["scheme"].str.endswith("-ps")]
    assert (ps["servers"] == ps["nodes"]).all()  # one dedicated server host per worker node


def test_one_node_is_the_same_on_every_network(curve):
    """At 4 GPUs nothing crosses a NIC: the three networks predict alike (BytePS runs no server there)."""
    one = curve[curve["workers"] == 4].pivot_table(
        index=["workload", "scheme"], columns="network", values="throughput_median"
    )
    assert (one.max(axis=1) / one.min(axis=1) - 1 < 1e-9).all()


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


def test_the_bytescheduler_plugin_waits_for_the_gil_and_for_every_rank_to_hand_partitions_over(models):
    """The study's ByteScheduler-A2A is the 2019 plugin: the ranks other than 0 hand partitions over from
    hooks that wait for the GIL while the poller spins, so its backward is longer than the GPU's and the
    iteration never faster than with a poller that never wins the GIL."""
    from dataclasses import replace

    sn = study_network(NOMINAL, "ib-100g", 1)
    st = sn.network.stacks["bytescheduler-a2a"]
    assert st.leader_only and st.gil_forced_s == pytest.approx(
        NOMINAL["py_switch_interval_s"] + NOMINAL["gil_forced_extra_s"]
    )
    resnet = next(m for m in models if m.workload == "resnet50")
    cl = Cluster(1, 4, sn.network.inter, sn.network.intra, 1, measured=sn.network.measured)
    knobs = sn.knobs["bytescheduler-a2a"]
    held = simulate("bytescheduler-a2a", resnet, cl.with_(stack=st), knobs)
    free = simulate(
        "bytescheduler-a2a", resnet, cl.with_(stack=replace(st, gil_waits_per_hook=0.0, fwd_gil_per_layer=0.0)), knobs
    )
    assert held.plan["library"].startswith("bytescheduler") and held.plan["hooks_waited"] > 0
    assert free.plan["hooks_waited"] == 0 and free.plan["gil_waits"] == 0
    assert held.iter_s > free.iter_s * 1.05
    assert held.backward_s > resnet.backward_total_s * 1.05  # the autograd thread held the GPU back
    # each wait is bounded by the switch interval and its forced hand-off
    assert held.plan["gil_waited_s"] <= held.plan["gil_waits"] * st.gil_forced_s + 1e-9


def test_the_gil_rule_waits_for_the_first_of_a_finished_item_an_empty_queue_or_a_forced_switch():
    from harness.sim.des import Sim
    from harness.study.gil import Spinner

    def waited(inflight: int, finish_at: float | None, forced: float = 5e-3, release: float = 1e-4) -> float:
        sim = Sim()
        spin = Spinner(sim, forced, release)
        spin.add(inflight)
        if finish_at is not None:
            sim.at(finish_at, spin.finish)
        out = {}

        def thread():
            yield from spin.acquire()
            out["t"] = sim.now

        sim.process(thread())
        sim.run()
        return out["t"]

    assert waited(0, None) == 0.0  # the poller sleeps in queue.get()
    assert waited(2, None) == pytest.approx(5e-3)  # forced switch, hand-off included
    assert waited(2, 1e-3) == pytest.approx(1e-3 + 1e-4)  # a finished item gives the GIL up
    assert waited(1, 9e-3) == pytest.approx(5e-3)  # but never longer than a forced switch


def test_communication_and_compute_sharing_the_gpu_slow_what_overlaps_and_nothing_else(models):
    """The interference pass: WFBP overlaps its all-reduces with backward and is slowed; BSP overlaps nothing
    and is not; both slowdowns at zero give the plain model."""
    from dataclasses import replace

    sn = study_network(NOMINAL, "ib-100g", 2)
    bert = next(m for m in models if m.workload == "bert-base")
    cl = Cluster(2, 4, sn.network.inter, sn.network.intra, 2, measured=sn.network.measured)
    st = sn.network.stacks["wfbp-a2a"]
    assert st.contended
    none = replace(st, overlap_compute_slowdown=0.0, overlap_comm_slowdown=0.0)
    heavy = replace(st, overlap_compute_slowdown=0.3, overlap_comm_slowdown=0.6)
    w0 = simulate("wfbp-a2a", bert, cl.with_(stack=none))
    w1 = simulate("wfbp-a2a", bert, cl.with_(stack=heavy))
    assert w1.iter_s > w0.iter_s and w1.plan["overlap_comm_scale"] > 1.0 and w1.plan["overlap_compute_stretch"] > 1.0
    assert "overlap_comm_scale" not in w0.plan
    b0 = simulate("bsp-a2a", bert, cl.with_(stack=none))
    b1 = simulate("bsp-a2a", bert, cl.with_(stack=heavy))
    assert b1.iter_s == pytest.approx(b0.iter_s, rel=1e-9)  # nothing runs beside its backward


def test_byteps_over_tcp_moves_every_byte_through_one_zeromq_thread(models):
    """Without RDMA a worker's pushes and pulls share its van's one I/O thread: a slow van slows the IPoIB
    PS cells; the RDMA van (IB) has no such thread."""
    from dataclasses import replace

    bert = next(m for m in models if m.workload == "bert-large")
    sn = study_network(NOMINAL, "ipoib-100g", 4)
    st = sn.network.stacks["wfbp-ps"]
    assert st.byteps.van_bytes_per_s == pytest.approx(NOMINAL["zmq_van_gbyte_s"] * 1e9)
    assert study_network(NOMINAL, "ib-100g", 4).network.stacks["wfbp-ps"].byteps.van_bytes_per_s == math.inf
    cl = Cluster(4, 4, sn.network.inter, sn.network.intra, 4, host=sn.network.host)
    slow = replace(st, byteps=replace(st.byteps, van_bytes_per_s=1e9))
    free = replace(st, byteps=replace(st.byteps, van_bytes_per_s=math.inf))
    t_slow = simulate("wfbp-ps", bert, cl.with_(stack=slow), sn.knobs["wfbp-ps"]).iter_s
    t_free = simulate("wfbp-ps", bert, cl.with_(stack=free), sn.knobs["wfbp-ps"]).iter_s
    # 1 GB/s through one thread for 2 x 1.34 GB per iteration: at least 2.6 s
    assert t_slow > 2 * bert.total_grad_bytes / 1e9 > t_free


def test_each_method_steps_the_optimizer_its_script_ran(models):
    """BERT: AdamW on Horovod and Adam under ByteScheduler cost the same seven ops and 19 passes a parameter,
    BytePS's SGD one op and 3 passes; the single-GPU iteration keeps its measured length after the split."""
    from harness.sim.costs import with_optimizer

    v = dict(NOMINAL)
    bert = next(m for m in models if m.workload == "bert-large")
    base = study.study_compute(bert, v)
    assert base.iteration_s == pytest.approx(bert.iteration_s, rel=1e-9)
    sn = study_network(v, "ib-100g", 2)
    adam = with_optimizer(base, sn.network.stacks["bsp-a2a"])
    sgd = with_optimizer(base, sn.network.stacks["bsp-ps"])
    assert adam.optimizer_s == pytest.approx(base.optimizer_s, rel=1e-6)  # the single-GPU run's, Adam-family
    assert sgd.optimizer_s < adam.optimizer_s / 3
    resnet = study.study_compute(next(m for m in models if m.workload == "resnet50"), v)
    assert with_optimizer(resnet, sn.network.stacks["bsp-a2a"]).optimizer_s == pytest.approx(resnet.optimizer_s)
    same = study_network({**v, "per_method_optimizer": 0.0}, "ib-100g", 2)
    assert with_optimizer(base, same.network.stacks["bsp-ps"]) is base


def test_horovods_negotiation_grows_with_the_ring_and_meets_the_authors_fits():
    """Open MPI's linear Gatherv makes Horovod's round grow with the workers; per-collective start-up at 32
    GPUs lands within a factor of two of what the study's authors fitted on their own Horovod clusters."""
    from harness.study.cluster import horovod_negotiation_s, startup_rows

    for fam in FAMILIES:
        negs = [horovod_negotiation_s(NOMINAL, fam, n) for n in NODE_COUNTS]
        assert negs == sorted(negs) and negs[-1] > negs[0]
    rows = startup_rows(NOMINAL)
    assert len(rows) == len(FAMILIES) * len(NODE_COUNTS)
    for r in rows:
        if r["workers"] == 32:
            assert 0.5 < r["model_s"] / r["authors_fit_s"] < 2.0, r


def test_what_each_mechanism_does_to_the_ranking_is_one_row_per_mechanism_and_size(models):
    bert = [m for m in models if m.workload == "bert-base"]
    eff = study.mechanism_effects(bert, "flops", node_counts=(1, 2), processes=1)
    assert list(eff["mechanism"].unique()) == list(study.MECHANISMS)
    assert set(eff["workers"]) == {4, 8} and (eff["rows"] == 3).all()
    gil = eff[eff["mechanism"] == "ByteScheduler's Python threads and the GIL"]
    assert len(gil) == 2
    assert (gil["loses_most"] == "bytescheduler-a2a").all() and (gil["loses_most_change"] < 0).all()
    # the serialised forward is 0 at the sourced inputs (only a one-node calibration sets it): it moves nothing
    gap = eff[eff["mechanism"] == "ByteScheduler's forward serialised with the host"]
    assert len(gap) == 2 and (gap["winner_changed"] == 0).all() and (gap["largest_change"].abs() < 1e-9).all()


def test_the_inputs_carry_the_committed_microbenchmark_figures():
    """The GIL and van inputs (harness/study/inputs/bytescheduler.toml, byteps.toml) are the figures of the JSON
    committed beside the report (regenerate both together: scripts/reference/gil_handoff.py and zmq_van.py)."""
    import json
    from pathlib import Path

    GIL = {
        k: (INPUTS[n].value, INPUTS[n].low, INPUTS[n].high)
        for k, n in (("forced_extra", "gil_forced_extra_s"), ("handoff", "gil_handoff_s"), ("scan", "bs_scan_step_s"))
    }
    ZMQ_VAN = (INPUTS["zmq_van_gbyte_s"].value,)
    folder = Path(__file__).resolve().parents[3] / "reports" / "study-prediction"
    gil = json.loads((folder / "gil-handoff.json").read_text())
    van = json.loads((folder / "zmq-van.json").read_text())
    keep5 = next(h for h in gil["handoff"] if h["switch_ms"] == 5.0 and h["spinners"] == 1 and h["poll"] == "keeps GIL")
    assert keep5["median_s"] - 5e-3 == pytest.approx(GIL["forced_extra"][0], abs=0.1e-3)
    rel5 = next(h for h in gil["handoff"] if h["switch_ms"] == 5.0 and h["spinners"] == 1 and h["poll"] != "keeps GIL")
    assert rel5["median_s"] == pytest.approx(GIL["handoff"][0], abs=0.03e-3)
    assert gil["python_costs"]["scan_step_s"] == pytest.approx(GIL["scan"][0], rel=0.25)
    assert min(van["both_gbyte_s_all"]) <= ZMQ_VAN[0] <= max(van["both_gbyte_s_all"]) + 0.1


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
    slow = study.predict_curve(
        [bert], "flops", {**NOMINAL, "host_path_gbyte_s": 12.0}, node_counts=(4,), families=("ib-100g",)
    )
    f = fast.set_index("scheme")["throughput_median"]
    s = slow.set_index("scheme")["throughput_median"]
    for m in ("bsp-a2a", "wfbp-a2a", "bsp-ps", "wfbp-ps"):
        assert s[m] < f[m], m


# --- one model behind the CLI ------------------------------------------------------------------------------


def test_ddlbench_predict_runs_the_study_cluster_with_intervals(tmp_path, models):
    out = tmp_path / "p.parquet"
    r = CliRunner().invoke(
        cli,
        [
            "predict",
            "--workload",
            "bert-base",
            "--device-preset",
            "study-gpu",
            "--compute",
            "flops",
            "--cluster",
            "study-eth-10g",
            "--nodes",
            "1,2",
            "--schemes",
            "bsp-a2a,wfbp-ps",
            "--intervals",
            "3",
            "-o",
            str(out),
        ],
    )
    assert r.exit_code == 0, r.output
    df = pd.read_parquet(out)
    assert set(df["workers"]) == {4, 8} and set(df["network"]) == {"eth-10g"} and len(df) == 4
    assert (df["pred_low"] <= df["throughput_median"]).all() and (df["throughput_median"] <= df["pred_high"]).all()
    bert = next(m for m in models if m.workload == "bert-base")
    same = study.predict_curve([bert], None, node_counts=(1, 2), families=("eth-10g",), methods=["bsp-a2a", "wfbp-ps"])
    a = df.set_index(["workers", "scheme"])["throughput_median"].sort_index()
    b = same.set_index(["workers", "scheme"])["throughput_median"].sort_index()
    assert list(a.round(6)) == list(b.round(6))  # the study script's model, not a copy


@pytest.mark.parametrize(
    "args, needle",
    [
        (["--cluster", "study-eth-1g"], "known clusters are study-eth-10g, study-ib-100g, study-ipoib-100g"),
        (["--cluster", "study-ib-100g", "--nodes", "3"], "no entry for 12 workers"),
        (["--cluster", "study-ib-100g", "--gpus-per-node", "8"], "hold 4 GPUs"),
        (["--link", "ib-100g", "--cluster", "study-ib-100g", "--intervals", "4"], "--intervals needs input ranges"),
    ],
)
def test_ddlbench_predict_refuses_study_misuse_in_one_line(args, needle):
    r = CliRunner().invoke(cli, ["predict", "--workload", "bert-base", "--device-preset", "study-gpu", *args])
    assert r.exit_code == 2, r.output
    assert needle in r.output and len(r.output.strip().splitlines()) == 1, r.output


def test_study_merge_in_one_pass_equals_recomputing_every_start():  # noqa: C901 - the authors' loop, as written
    """study_merge walks once; the authors' code recomputes every start after each merge: same groups."""
    import random

    def reference(deltas, numels, alpha, beta):  # the authors' recurrence, recomputed after every merge
        L = len(numels)
        p = [numels[L - 1 - l] for l in range(L)]
        tb = [deltas[L - 1 - l] for l in range(L)]
        tc = [alpha + beta * n * 4 if n else 0.0 for n in p]
        taob = [0.0] * L
        for l in range(L - 2, -1, -1):
            taob[l] = taob[l + 1] + tb[l + 1]

        def starts():
            t = [0.0] * L
            t[L - 1] = taob[L - 1] + tb[L - 1]
            for l in range(L - 2, -1, -1):
                t[l] = max(t[l + 1] + tc[l + 1], taob[l] + tb[l])
            return t

        def merge(l):
            tc[l] = 0.0
            p[l - 1] += p[l]
            p[l] = 0
            tc[l - 1] = alpha + beta * p[l - 1] * 4

        taoc, groups, group = starts(), [], []
        for l in range(L - 1, 0, -1):
            group.append(l)
            ready = taob[l - 1] + tb[l - 1]
            merged = ready < taoc[l] + tc[l] and (taoc[l] > ready or ready - taoc[l] < alpha)
            if merged:
                merge(l)
            if not merged and p[l] < 8192:
                merge(l)
                merged = True
            if merged:
                taoc = starts()
            else:
                groups.append(group)
                group = []
        groups.append([*group, 0])
        return [[L - 1 - l for l in g] for g in groups]

    rng = random.Random(7)
    for _ in range(300):
        L = rng.randint(1, 50)
        deltas = [rng.random() * 1e-3 for _ in range(L)]
        numels = [rng.choice([10, 5000, 20000, 10**6, 4 * 10**6]) for _ in range(L)]
        a, b = rng.random() * 1e-3, rng.random() * 1e-9
        assert study_merge(deltas, numels, a, b) == reference(deltas, numels, a, b)


def test_the_nccl_ring_at_one_node_is_bounded_by_the_slower_of_shm_and_the_host_path():
    from harness.study.cluster import links, nccl_allreduce

    v = dict(NOMINAL)
    inter, intra = links(v, "ib-100g")
    ab = nccl_allreduce(v, inter, intra, 1)
    edge = min(v["shm_edge_gbyte_s"], v["host_path_gbyte_s"] / 4) * 1e9
    assert ab.beta_s_per_byte == pytest.approx(2 * 3 / 4 / edge, rel=1e-6)
    ab8 = nccl_allreduce(v, inter, intra, 8)
    edge8 = min(v["shm_edge_gbyte_s"], v["ib_gbyte_s"], v["host_path_gbyte_s"] / 5) * 1e9
    assert ab8.beta_s_per_byte == pytest.approx(2 * 31 / 32 / edge8, rel=1e-6)
    assert isinstance(intra, Link)
