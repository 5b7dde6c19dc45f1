"""The predictor's pure parts: network models, each method's simulated schedule, rows, validation.

pytest -q tests/unit/predict/test_predict.py -s      # -s prints the speed of the full grid
"""

from __future__ import annotations

import itertools
import math
import time

import pandas as pd
import pytest

from harness.core.schema import SUMMARY_COLUMNS
from harness.grouping.cost import MB
from harness.grouping.rules import merge_plan
from harness.predict.commbench_fit import fit_commbench, link_from_allreduce
from harness.predict.predictor import (
    SEVEN_METHODS,
    Network,
    method_knobs,
    modelled,
    predict_rows,
    simulate,
)
from harness.report.validation import validate
from harness.sim.bucketed import ddp_buckets
from harness.sim.links import AlphaBeta, Cluster, Link, get_link
from helpers import BERTISH, cluster, toy

A2A = ["bsp-a2a", "wfbp-a2a", "mgwfbp", "bytescheduler-a2a", "ddp", "horovod"]


# --- network ---------------------------------------------------------------------------------------------


def test_ring_allreduce_is_the_textbook_formula():
    link = Link("x", 8.0, 10e-6)  # 1 GB/s
    c = Cluster(4, 1, link, link)
    ab = c.allreduce_cost()
    m = 100e6
    assert ab.time_s(m) == pytest.approx(2 * 3 / 4 * m / 1e9 + 2 * 3 * 10e-6)


def test_flat_ring_is_bounded_by_the_slower_link_and_hierarchical_differs():
    fast, slow = Link("fast", 800.0, 1e-6), Link("slow", 8.0, 20e-6)
    ring = Cluster(4, 4, slow, fast).allreduce_cost()
    assert ring.beta_s_per_byte == pytest.approx(2 * 15 / 16 / 1e9)
    assert ring.alpha_s == pytest.approx(2 * 15 * 20e-6)
    hier = Cluster(4, 4, slow, fast, allreduce="hierarchical").allreduce_cost()
    assert hier.alpha_s == pytest.approx(2 * 3 * 1e-6 + 2 * 3 * 20e-6)
    assert hier.beta_s_per_byte == pytest.approx(2 * 3 / 4 / 100e9 + 2 * 3 / 4 / 1e9)
    assert Cluster(1, 1, slow, fast).allreduce_cost() == AlphaBeta(0.0, 0.0)


def test_presets_cite_a_source():
    from harness.sim.links import LINKS

    for name, link in LINKS.items():
        assert link.source and link.rate_gbit_s > 0 and link.latency_s > 0, name
    for name in ("eth-10g", "eth-25g", "ib-100g", "ipoib-100g", "pcie3-x16", "nvlink2"):
        assert name in LINKS


def test_commbench_fit_round_trips_through_the_ring_model():
    alpha, beta = 60e-6, 1 / 1.2e9
    rows = [
        {"collective": "allreduce", "workers": 4, "size_bytes": s, "rep": r, "time_s": alpha + beta * s}
        for s in (4096, 65536, 1 << 20, 1 << 24)
        for r in range(3)
    ]
    fits = fit_commbench(pd.DataFrame(rows))
    fit = fits["allreduce"][4]
    assert fit.alpha_s == pytest.approx(alpha) and fit.beta_s_per_byte == pytest.approx(beta)
    link = link_from_allreduce(fit, 4, "fitted")
    again = Cluster(4, 1, link, link).allreduce_cost()  # same N: the same line
    assert again.alpha_s == pytest.approx(alpha) and again.beta_s_per_byte == pytest.approx(beta)
    eight = Cluster(8, 1, link, link).allreduce_cost()  # extrapolated along the ring model
    assert eight.alpha_s == pytest.approx(alpha * 7 / 3)


# --- methods ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", [*A2A, "local"])
def test_a_single_worker_predicts_no_communication(name):
    c = BERTISH
    out = simulate(name, c, cluster(1, 1, inter="eth-10g"))
    slack = method_knobs("horovod")["cycle_time_ms"] / 1000 if name == "horovod" else 0.0
    assert c.iteration_s - 1e-9 <= out.iter_s <= c.iteration_s + slack + 1e-9


def test_bsp_is_compute_plus_one_allreduce_of_all_bytes():
    c = BERTISH
    for net in ("ib-100g", "eth-10g"):
        cl = cluster(4, 4, inter=net)
        out = simulate("bsp-a2a", c, cl)
        assert out.iter_s == pytest.approx(c.iteration_s + cl.allreduce_cost().time_s(c.total_grad_bytes))


@pytest.mark.parametrize("net", ["ib-100g", "ipoib-100g", "eth-25g", "eth-10g"])
@pytest.mark.parametrize("nodes", [1, 2, 8, 64])
def test_wfbp_beats_bsp_unless_its_extra_startups_cost_more_than_the_overlap(net, nodes):
    # WFBP pays one start-up (alpha) per tensor instead of one in all: the most it can lose to BSP
    # is (tensors - 1) * alpha; on a few nodes, where alpha is small, it must win.
    c = toy([8.0] * 20, [4.0] * 20)
    cl = cluster(nodes, 4, inter=net)
    wfbp, bsp = simulate("wfbp-a2a", c, cl).iter_s, simulate("bsp-a2a", c, cl).iter_s
    assert wfbp <= bsp + 19 * cl.allreduce_cost().alpha_s + 1e-12
    if nodes <= 8:
        assert wfbp <= bsp + 1e-12


def test_mgwfbp_is_not_slower_than_wfbp_when_alpha_dominates():
    c = toy([0.01] * 200, [0.05] * 200)  # 200 tiny tensors, 10 ms of backward
    for n in (2, 8, 32):
        cl = cluster(n, 4, inter="eth-10g")
        mg, wf = simulate("mgwfbp", c, cl), simulate("wfbp-a2a", c, cl)
        assert mg.iter_s <= wf.iter_s + 1e-12
        assert len(mg.plan["group_sizes"]) < 200  # it did merge


def test_mgwfbp_uses_merge_plan_with_the_clusters_alpha_beta():
    c = BERTISH
    cl = cluster(4, 4, inter="ipoib-100g")
    ab = cl.allreduce_cost()
    groups = merge_plan(c.backward_deltas(), [c.grad_bytes[i] for i in c.ready_order], ab.alpha_s, ab.beta_s_per_byte)
    out = simulate("mgwfbp", c, cl)
    assert out.plan["group_sizes"] == [len(g) for g in groups]


def test_bytescheduler_overlaps_communication_with_the_next_forward():
    # Input layer: small gradient, ready last, needed first. Output layer: 64 MB, ready first.
    c = toy([0.5, 0.5, 0.5, 64.0], [2.0, 2.0, 2.0, 2.0], forward_ms=[20.0, 20.0, 20.0, 1.0])
    cl = cluster(2, 1, inter="eth-10g")
    bs, wf = simulate("bytescheduler-a2a", c, cl), simulate("wfbp-a2a", c, cl)
    comm_only = simulate("bsp-a2a", c, cl).iter_s - c.iteration_s
    assert bs.iter_s < wf.iter_s - 0.040  # the first three layers' forward (60 ms) hid communication
    assert bs.iter_s < c.iteration_s + comm_only
    assert bs.forward_s > c.forward_s  # the last layer waited for its parameters during forward
    assert bs.comm_wait_s == 0.0 and bs.optimizer_s == 0.0  # as the timing loop sees ByteScheduler


def test_bytescheduler_credit_window_matters():
    c = toy([0.5, 0.5, 0.5, 64.0], [2.0, 2.0, 2.0, 2.0], forward_ms=[20.0, 20.0, 20.0, 1.0])
    cl = cluster(2, 1, inter="eth-10g")
    tight = simulate("bytescheduler-a2a", c, cl, {"credit_mb": 4.0})
    unlimited = simulate("bytescheduler-a2a", c, cl, {"credit_mb": 1e6})
    assert tight.iter_s < unlimited.iter_s  # with no credit the 64 MB block is all queued ahead


@pytest.mark.parametrize("name", ["bsp-ps", "wfbp-ps", "bytescheduler-ps"])
def test_more_parameter_servers_are_not_slower(name):
    c = BERTISH
    times = [simulate(name, c, cluster(4, 4, inter="ib-100g", servers=s)).iter_s for s in (1, 2, 4, 8, 16)]
    assert all(b <= a + 1e-9 for a, b in itertools.pairwise(times)), times
    assert times[-1] < times[0]


@pytest.mark.parametrize("name", ["bsp-ps", "wfbp-ps", "bytescheduler-ps"])
def test_local_reduce_pushes_one_copy_per_node(name):
    """BytePS's hierarchy (knob local_reduce, the default): a node's workers sum each key first and one
    copy crosses the NIC; flat, each of the g workers pushes its own (g times the bytes)."""
    c = BERTISH
    cl = cluster(4, 4, inter="eth-10g", servers=4)
    flat, hybrid = (simulate(name, c, cl, {"local_reduce": v}) for v in (0, 1))
    assert hybrid.iter_s < flat.iter_s
    assert flat.comm_wait_s > 2 * hybrid.comm_wait_s or name == "bytescheduler-ps"
    one = cluster(4, 1, inter="eth-10g", servers=4)  # one worker per node: nothing to reduce locally
    assert simulate(name, c, one, {"local_reduce": 0}).iter_s == simulate(name, c, one, {"local_reduce": 1}).iter_s


def test_ps_time_follows_the_server_nic_bound():
    # One server, W workers, everything after backward: the server NIC carries W x bytes each way,
    # both directions at once (full duplex), so pushes of one key overlap pulls of the previous:
    # ~ W * M / B plus one key's pull (BytePS's non-colocated PS bound, max(M/B, W*M/(S*B))).
    c = toy([4.0] * 10, [1.0] * 10)
    link = Link("l", 8.0, 0.0)  # 1 GB/s, no latency
    cl = Cluster(4, 1, link, link, servers=1)
    out = simulate("bsp-ps", c, cl, {"server_gbyte_s": 1e9})
    one_way = 4 * c.total_grad_bytes / 1e9
    assert one_way < out.iter_s - c.iteration_s < one_way * 1.15
    two = simulate("bsp-ps", c, cl.with_(servers=2), {"server_gbyte_s": 1e9})
    assert two.iter_s - c.iteration_s < (out.iter_s - c.iteration_s) * 0.6  # halved, plus the tail


def test_colocated_server_spares_its_own_hosts_traffic():
    # 2 hosts, one worker each, one server: on a host of its own its NIC carries both workers' pushes;
    # on worker host 0 only worker 1's (worker 0 pushes through loopback): half the bytes each way.
    c = toy([4.0] * 10, [1.0] * 10)
    link = Link("l", 8.0, 0.0)  # 1 GB/s
    cl = Cluster(2, 1, link, link, servers=1)
    ded = simulate("bsp-ps", c, cl, {"server_gbyte_s": 1e9}).iter_s - c.iteration_s
    col = simulate("bsp-ps", c, cl.with_(server_hosts="colocated"), {"server_gbyte_s": 1e9}).iter_s - c.iteration_s
    one_way = c.total_grad_bytes / 1e9
    assert 2 * one_way < ded < 2 * one_way * 1.15
    assert one_way < col < one_way * 1.15
    for name in ("wfbp-ps", "bytescheduler-ps"):  # every PS method runs on co-located servers
        out = simulate(name, c, cl.with_(server_hosts="colocated"), {"server_gbyte_s": 1e9})
        assert c.iteration_s < out.iter_s < c.iteration_s + 2 * col


def test_token_bucket_lets_a_burst_through_after_idling():
    from harness.sim.des import Fifo, Sim

    sim = Sim()
    link = Fifo(sim, "shaped", rate=1e6, burst=5e5, peak=1e8)  # 1 MB/s, 0.5 MB bucket, 100 MB/s under it
    assert link.reserve_bytes(1e6, 0.001) == pytest.approx(0.001 + 5e5 / 1e8 + 5e5 / 1e6)
    end = link.reserve_bytes(1e5)  # back to back: bucket empty
    assert end - 0.506 == pytest.approx(0.1)
    sim.now = end + 0.2  # idle 0.2 s: 0.2 MB of tokens
    assert link.reserve_bytes(3e5) - sim.now == pytest.approx(2e5 / 1e8 + 1e5 / 1e6)
    plain = Fifo(Sim(), "plain", rate=1e6)
    assert plain.reserve_bytes(1e6, 0.001) == pytest.approx(1.001)


def test_shaped_fit_ignores_the_bucket_and_averages_small_messages():
    from harness.predict.commbench_fit import fit_shaped

    burst, beta, rows = 1e6, 8e-9, []
    for size in [4096 * 4**k for k in range(8)]:  # 4 KiB .. 64 MiB
        for rep in range(4):
            if size <= 64 * 1024:
                t = [0.5e-3, 0.5e-3, 0.5e-3, 4.5e-3][rep]  # a timer tick now and then
            else:
                t = 1e-3 + max(0.0, size - burst) * beta + min(size, burst) * 1e-10
            rows.append(
                {"collective": "allreduce", "workers": 2, "size_bytes": size, "rep": rep, "time_s": t, "network": "tb"}
            )
    df = pd.DataFrame(rows)
    ((ab, _peak),) = fit_shaped(df, burst).values()
    assert ab.alpha_s == pytest.approx(1.5e-3)  # the mean, not the median 0.5 ms
    assert ab.beta_s_per_byte == pytest.approx(beta, rel=1e-6)
    naive = fit_commbench(df)["allreduce"][2]
    assert naive.beta_s_per_byte != pytest.approx(beta, rel=0.01) or naive.alpha_s < 1e-3


def test_shaped_link_makes_small_gradients_cheaper_than_the_plain_fit():
    c = toy([0.5] * 4, [5.0] * 4)  # 2 MB, comm-bound, idle between
    plain = Link("p", 0.2, 1e-3)
    shaped = Link("s", 0.2, 1e-3, burst_bytes=1e6, peak_gbit_s=5.0)
    t_plain = simulate("bsp-a2a", c, Cluster(2, 1, plain, plain)).iter_s
    t_shaped = simulate("bsp-a2a", c, Cluster(2, 1, shaped, shaped)).iter_s
    saved = 1e6 / (0.2e9 / 8) - 1e6 / (5e9 / 8)  # the bucket at rate vs at peak
    assert t_plain - t_shaped == pytest.approx(saved, rel=0.02)


def test_ddp_buckets_follow_the_reducer():
    sizes = [int(0.6 * MB), int(0.6 * MB), 10 * MB, 20 * MB, 1 * MB]
    assert ddp_buckets([0, 1, 2, 3, 4], sizes, 25 * MB) == [[0, 1], [2, 3], [4]]


# --- rows and validation ---------------------------------------------------------------------------------


def _net(name="ib-100g"):
    return Network(name, get_link(name), get_link("pcie3-x16"))


def test_predicted_rows_have_the_summary_columns():
    df = predict_rows([BERTISH], [_net()], [1, 2], 4, list(modelled()))
    assert list(df.columns[: len(SUMMARY_COLUMNS)]) == SUMMARY_COLUMNS
    assert (df["source"] == "predicted").all() and (df["status"] == "ok").all()
    assert len(df) == 2 * len(modelled())
    assert df["scaling_efficiency"].between(0, 1 + 1e-9).all()
    ps = df[df["scheme"].str.endswith("-ps")]
    assert (ps["servers"] == ps["nodes"]).all()
    x1 = BERTISH.batch / BERTISH.iteration_s
    assert df["baseline_throughput"].eq(x1).all()


def test_validate_reports_ape_per_cell_and_the_median():
    keys = dict(workload="w", batch_per_worker=8, seq_len=float("nan"))
    pred = pd.DataFrame(
        [
            {**keys, "scheme": s, "workers": 2, "iter_s_median": t, "throughput_median": 16 / t, "source": "predicted"}
            for s, t in (("a", 1.1), ("b", 0.5), ("c", 3.0))
        ]
    )
    meas = pd.DataFrame(
        [
            {
                **keys,
                "scheme": s,
                "workers": 2,
                "iter_s_median": t,
                "throughput_median": 16 / t,
                "source": "measured",
                "status": st,
            }
            for s, t, st in (("a", 1.0, "ok"), ("b", 1.0, "ok"), ("c", 1.0, "failed"))
        ]
    )
    v = validate(pred, meas)
    assert list(v["scheme"]) == ["a", "b"]
    assert list(v["ape_pct"].round(6)) == [10.0, 50.0]
    assert v.attrs["median_ape_pct"] == pytest.approx(30.0)


def test_validate_matches_cells_on_their_own_network():
    keys = dict(workload="w", batch_per_worker=8, seq_len=float("nan"), scheme="a", workers=2)
    pred = pd.DataFrame(
        [
            {**keys, "network": n, "iter_s_median": t, "throughput_median": 16 / t}
            for n, t in (("slow", 2.0), ("fast", 1.0))
        ]
    )
    meas = pd.DataFrame(
        [
            {**keys, "network": n, "iter_s_median": t, "throughput_median": 16 / t, "status": "ok"}
            for n, t in (("slow", 2.2), ("fast", 1.1))
        ]
    )
    v = validate(pred, meas)
    assert len(v) == 2 and sorted(v["network"]) == ["fast", "slow"]
    assert v["ape_pct"].round(6).tolist() == [9.090909, 9.090909]


# --- speed -------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def real_models():
    from harness.predict.compute import compute_model
    from harness.predict.profiler import counted_profile

    out = []
    for wl, thr in (("resnet50", 253.1), ("bert-base", 212.8), ("bert-large", 49.0), ("gpt2-small", 20.0)):
        out.append(compute_model(counted_profile(wl, batch=2), "study-gpu", throughput=thr, batch=8))
    return out


def test_the_whole_grid_predicts_in_seconds(real_models):
    nodes = [1, 2, 4, 8, 16, 32, 64, 128, 256, 1024]
    t0, c0 = time.perf_counter(), time.process_time()
    df = predict_rows(real_models, [_net("ib-100g")], nodes, 4, [m for m in modelled() if m != "local"])
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    # CPU time is the figure to compare across machines: on a shared box wall time is CPU time
    # divided by the share of a core this process got.
    print(
        f"\n{len(df)} predictions (4 workloads x {len(nodes)} scales x {len(modelled()) - 1} methods) "
        f"in {wall:.2f} s wall, {cpu:.2f} s CPU"
    )
    assert len(df) == 4 * len(nodes) * (len(modelled()) - 1)
    assert df["iter_s_median"].map(math.isfinite).all()
    big = df[(df["workers"] == 4096) & df["scheme"].isin(SEVEN_METHODS)]
    assert (big["scaling_efficiency"] < 1).all()


# --- the shared host path and TCP's per-message cost (harness/sim/links.py, ps.py) --------------------

HOST = Link("host", 96.0, 2e-6, "one PCIe 3.0 x16 path to host memory (test)")


def _cluster(inter: str, per_message_s: float = 0.0, host: Link | None = HOST, nodes: int = 8, g: int = 4) -> Cluster:
    from dataclasses import replace

    return Cluster(
        nodes, g, replace(get_link(inter), per_message_s=per_message_s), get_link("pcie3-x16"), nodes, host=host
    )


def test_no_p2p_staging_through_the_shared_host_path_slows_allreduce():
    """GPUs without peer-to-peer stage every hop through host memory over one shared path: on 100 Gb/s
    RDMA that path, not the NIC, bounds the ring (5 step-chunks each way per step with 4 GPUs), so every
    all-reduce method slows; on 10 GbE the NIC stays the bottleneck and nothing changes."""
    c = BERTISH
    ib, direct = _cluster("ib-100g"), _cluster("ib-100g", host=None)
    assert ib.allreduce_cost().beta_s_per_byte == pytest.approx(2 * 31 / 32 * 5 / HOST.bytes_per_s)
    for name in ("bsp-a2a", "wfbp-a2a", "mgwfbp", "bytescheduler-a2a"):
        assert simulate(name, c, ib).iter_s > simulate(name, c, direct).iter_s, name
    assert _cluster("ib-100g", g=1).allreduce_cost().beta_s_per_byte == pytest.approx(2 * 7 / 8 * 2 / HOST.bytes_per_s)
    eth, eth_direct = _cluster("eth-10g"), _cluster("eth-10g", host=None)
    assert eth.allreduce_cost().beta_s_per_byte == pytest.approx(eth_direct.allreduce_cost().beta_s_per_byte)


def _nic_and_host_busy(cl, local_reduce):
    from harness.sim.des import Sim
    from harness.sim.ps import ParameterServers

    sim = Sim()
    ps = ParameterServers(sim, cl, 1e9, None, local_reduce)
    for k in range(16):
        ps.push_pull(4e6, k % cl.n_servers)
    sim.run()
    return ps.up.busy_s + ps.down.busy_s, sum(f.busy_s for f in ps.host[0])


def test_local_reduce_cuts_ps_nic_bytes_4x_and_keeps_the_host_path_busy():
    """A hierarchical PS on 4 GPUs per node: one copy per node through the NIC instead of four; the
    intra-node reduce and broadcast now cross the host path, which carries 2 x 4 copies each way either
    way (flat: 4 pushes and 4 pulls staged; hybrid: 3 gather hops, 1 push, 1 pull, 3 broadcast hops)."""
    cl = _cluster("eth-10g", 20e-6)
    (nic_flat, host_flat), (nic_hier, host_hier) = (_nic_and_host_busy(cl, v) for v in (0, 1))
    assert nic_flat == pytest.approx(4 * nic_hier)
    assert host_hier == pytest.approx(host_flat) == pytest.approx(2 * 2 * 4 * 16 * 4e6 / cl.host.bytes_per_s)
    c = BERTISH
    for name in ("bsp-ps", "wfbp-ps"):  # on 10 GbE the NIC is the bottleneck: local reduce wins
        assert simulate(name, c, cl, {"local_reduce": 1}).iter_s < simulate(name, c, cl, {"local_reduce": 0}).iter_s


def test_tcp_per_message_cost_penalises_wfbp_without_fusion_more_than_rdma_and_bsp():
    """One all-reduce per tensor pays the TCP stack's per-message cost on every ring step of every
    tensor; BSP pays it once; RDMA (verbs) not at all."""
    from dataclasses import replace

    c = BERTISH
    penalty = {}
    for label, per_message in (("ib-100g", 0.0), ("ipoib-100g", 20e-6), ("eth-10g", 20e-6)):
        cl = _cluster(label, per_message)
        free = cl.with_(inter=replace(cl.inter, per_message_s=0.0))
        for name in ("wfbp-a2a", "bsp-a2a"):
            penalty[label, name] = simulate(name, c, cl).iter_s - simulate(name, c, free).iter_s
    assert penalty["ib-100g", "wfbp-a2a"] == 0.0
    for tcp in ("ipoib-100g", "eth-10g"):
        assert penalty[tcp, "wfbp-a2a"] > 10 * penalty[tcp, "bsp-a2a"] > 0
        assert penalty[tcp, "wfbp-a2a"] > penalty["ib-100g", "wfbp-a2a"]


@pytest.mark.parametrize("scheme", ["dear", "fsdp"])
def test_predict_simulates_dear_and_fsdp(scheme):
    c = BERTISH
    alone = simulate(scheme, c, cluster(1, 1, inter="eth-10g"))
    assert alone.iter_s == pytest.approx(c.iteration_s, rel=0.05)  # one worker: compute only
    slow = simulate(scheme, c, cluster(2, 1, inter="eth-10g"))
    fast = simulate(scheme, c, cluster(2, 1, inter="ib-100g"))
    assert slow.iter_s > fast.iter_s > alone.iter_s * 0.99
    if scheme == "dear":  # the two halves overlap backward and forward: never slower than BSP's all-reduce
        assert slow.iter_s <= simulate("bsp-a2a", c, cluster(2, 1, inter="eth-10g")).iter_s + 1e-9
        assert slow.plan["buckets"] >= 2
