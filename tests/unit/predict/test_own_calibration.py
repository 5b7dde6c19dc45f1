"""ddlbench's own stacks calibrated from one-node and two-node runs (harness/predict/own_calibration.py): runs made
from known parameters are fitted back inside the stated intervals, and runs that cannot calibrate are refused in
one line."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest

from harness.core.errors import UserError
from harness.predict.own_calibration import (
    METHODS,
    Group,
    OwnModel,
    Runs,
    calibrate_own,
    profile_compute,
    read_runs,
)
from helpers import toy

WORKLOADS = {
    # few large tensors, a long backward: communication hides behind compute where a method lets it
    "big": toy([8.0, 1.0, 8.0, 1.0, 4.0], [20.0, 4.0, 20.0, 4.0, 10.0], batch=8, workload="big"),
    # many small tensors: per-gradient and per-collective costs show
    "small": toy([0.2] * 12, [1.0] * 12, batch=8, workload="small"),
}
TRUTH = {
    "intra_gbit_s": 12.0,
    "intra_latency_s": 60e-6,
    "hook_s": 150e-6,
    "launch_s": 200e-6,
    "copy_gbyte_s": 3.0,
    "overlap_compute_slowdown": 0.3,
    "overlap_comm_slowdown": 0.5,
    "engine_handoff_s": 0.1e-3,
    "net:rate_gbit_s": 0.8,
    "net:latency_s": 400e-6,
    "server_gbyte_s": 2.0,
    "server_message_s": 300e-6,
}


def compute(workload, g, local_s):
    m = WORKLOADS[workload]
    return m.scaled(local_s / m.iteration_s)


def synthetic(values: dict, methods=METHODS) -> list[pd.DataFrame]:
    """A one-node run (2 workers on loopback) and a two-node run (1 worker per node, 1 Gbit/s, one server beside a
    worker), their cells as the model gives them at `values`, 1 % spread."""
    groups = {
        "one": Group("one", "loopback", 1, 2, 1, "colocated", math.nan, False, "cpu", 8),
        "two": Group("two", "net", 2, 1, 1, "colocated", 1000.0, False, "cpu", 8),
    }
    local = {(g.run, g.network, w): WORKLOADS[w].iteration_s for g in groups.values() for w in WORKLOADS}
    keys = [(gk, w, m) for gk in groups for w in WORKLOADS for m in methods]
    empty = Runs(pd.DataFrame(columns=["group", "workload", "scheme"]), {g.key: g for g in groups.values()}, local, [])
    models = {(g.key, w): compute(w, g, local[(g.run, g.network, w)]) for g in groups.values() for w in WORKLOADS}
    got = OwnModel(empty, models)(values, [(groups[gk].key, w, m) for gk, w, m in keys])
    frames = []
    for gk, g in groups.items():
        rows = [_row(g, w, "local", 1, 1, 0, WORKLOADS[w].batch / WORKLOADS[w].iteration_s) for w in WORKLOADS] + [
            _row(g, w, m, g.nodes, g.nodes * g.per_node, 1 if m.endswith("-ps") else 0, got[(g.key, w, m)])
            for (k, w, m) in keys
            if k == gk
        ]
        frames.append(pd.DataFrame(rows))
        frames[-1].attrs["name"] = gk
    return frames


def _row(g, workload, scheme, nodes, workers, servers, x):
    it = WORKLOADS[workload].batch * workers / x
    return {
        "status": "ok",
        "workload": workload,
        "scheme": scheme,
        "workers": workers,
        "nodes": nodes,
        "network": g.network,
        "network_rate_mbit": g.rate_mbit,
        "servers": servers,
        "server_hosts": "colocated" if servers else None,
        "device": "cpu",
        "batch_per_worker": 8,
        "iter_s_median": it,
        "iter_s_std": 0.01 * it,
        "throughput_median": x,
    }


@pytest.fixture(scope="module")
def fitted():
    return calibrate_own(synthetic(TRUTH), compute, lowo=False)


def test_runs_made_from_known_parameters_are_fitted_back_inside_the_stated_intervals(fitted):
    assert fitted.fit.converged, fitted.fit.message
    assert fitted.cells["error"].abs().max() < 0.02  # every fitted cell reproduced
    rows = fitted.table().set_index("parameter")
    determined = rows[rows["determined"]]
    # the parameters every method leans on are determined by these cells
    assert {"net:rate_gbit_s", "intra_gbit_s", "hook_s", "server_gbyte_s"} <= set(determined.index)
    for name, r in determined.iterrows():
        assert r["low"] <= TRUTH[name] * 1.02 and TRUTH[name] * 0.98 <= r["high"], (
            name,
            r["value"],
            r["low"],
            r["high"],
        )
    assert fitted.networks == ["net"]
    # PS methods on one node are measured but not fitted, and say why
    assert set(fitted.unfitted["scheme"]) == {"bsp-ps", "wfbp-ps", "bytescheduler-ps"}
    assert fitted.unfitted["reason"].str.contains("loopback").all()


def test_the_fitted_network_predicts_more_nodes_as_the_true_one_does(fitted):
    from harness.predict.own_calibration import fitted_network, ps_knobs
    from harness.predict.predictor import predict_rows

    m = WORKLOADS["big"]
    truth = predict_rows([m], [fitted_network(TRUTH, "net", 3, False)], [3], 1, list(METHODS), 1, knobs=ps_knobs(TRUTH))
    got = predict_rows([m], [fitted.network("net")], [3], 1, list(METHODS), 1, knobs=fitted.knobs(METHODS))
    err = got["iter_s_median"].to_numpy() / truth["iter_s_median"].to_numpy() - 1
    assert abs(err).max() < 0.05, dict(zip(got["scheme"], err))


@pytest.mark.parametrize(
    "change, needle",
    [
        (lambda fs: [f[f["scheme"] != "local"] for f in fs], "no 1-worker cell"),
        (lambda fs: [f[f["workers"] == 1] for f in fs], "no cell of a method"),
        (lambda fs: [f.assign(status="failed") for f in fs], "no cell ended ok"),
    ],
)
def test_runs_that_cannot_calibrate_are_refused_in_one_line(change, needle):
    with pytest.raises(UserError) as e:
        read_runs(change(synthetic(TRUTH, methods=("ddp", "bsp-ps"))))
    assert needle in str(e.value) and "\n" not in str(e.value)


def test_a_method_without_cells_of_its_block_is_refused_by_name():
    cal = calibrate_own(synthetic(TRUTH, methods=("ddp", "bsp-a2a")), compute, lowo=False, starts=1)
    cal.check_methods(["ddp", "wfbp-a2a"])  # the stack's cells are there
    with pytest.raises(UserError, match=r"bsp-ps cannot be predicted calibrated.*add bsp-ps"):
        cal.check_methods(["bsp-ps"])


def test_not_a_run_directory_is_refused_in_one_line(tmp_path):
    with pytest.raises(UserError, match="not a run directory"):
        read_runs([tmp_path])


# --- `ddlbench predict --calibrate` on runs of the harness (the testbed check's inputs, reports/own-calibration/) ---

INPUTS = Path(__file__).resolve().parents[3] / "reports" / "own-calibration" / "inputs"
PROFILES = ["--profile", str(INPUTS / "profile-bert-base-tiny-c1.parquet")]


def _predict(*args):
    from click.testing import CliRunner

    from harness.cli.main import cli

    return CliRunner().invoke(cli, ["predict", *args])


def test_predict_calibrated_from_a_one_node_and_a_two_node_run_predicts_their_network_at_more_nodes():
    r = _predict(
        "--calibrate", str(INPUTS / "S1"), "--calibrate", str(INPUTS / "S2"), *PROFILES,
        "--nodes", "3", "--schemes", "ddp,bsp-a2a,wfbp-ps",
    )  # fmt: skip
    assert r.exit_code == 0, r.output[-2000:]
    for name in ("hook_s", "launch_s", "emulated-1gbit:rate_gbit_s", "server_gbyte_s"):
        assert f"fitted {name} = " in r.output
    rows = [line.split() for line in r.output.splitlines() if line.startswith("bert-base-tiny")]
    assert {(x[1], x[2], x[3]) for x in rows} == {("emulated-1gbit", "3", "3"), ("emulated-200mbit", "3", "3")}
    assert {x[4] for x in rows} == {"ddp", "bsp-a2a", "wfbp-ps"}


def test_predict_calibrated_from_one_node_runs_its_stacks_on_a_preset_and_needs_a_network():
    r = _predict(
        "--calibrate", str(INPUTS / "S1"), *PROFILES, "--link", "eth-10g", "--nodes", "2", "--schemes", "ddp,dear"
    )  # fmt: skip
    assert r.exit_code == 0, r.output[-2000:]
    assert "fitted launch_s = " in r.output and "eth-10g" in r.output
    assert "not calibrated: dear" in r.output  # said, not silently predicted as if it were
    r = _predict("--calibrate", str(INPUTS / "S1"), *PROFILES, "--nodes", "2", "--schemes", "ddp")
    assert r.exit_code == 2 and "a one-node run fits the stacks, not the network" in r.output
    assert len(r.output.strip().splitlines()) == 1, r.output


def test_predict_refuses_a_run_that_cannot_calibrate_in_one_line(tmp_path):
    s = pd.read_parquet(INPUTS / "S1" / "summary.parquet")
    (tmp_path / "run").mkdir()
    s[s["scheme"] != "local"].to_parquet(tmp_path / "run" / "summary.parquet")
    for target, needle in ((tmp_path / "run", "has no 1-worker cell"), (tmp_path, "not a run directory")):
        r = _predict("--calibrate", str(target), *PROFILES, "--link", "eth-10g", "--schemes", "ddp")
        assert r.exit_code == 2 and needle in r.output, r.output
        assert len(r.output.strip().splitlines()) == 1, r.output


def test_a_server_sharing_the_machine_of_its_ranks_gets_its_share_of_the_cores():
    g = Group("r", "net", 2, 1, 1, "colocated", 1000.0, True, "cpu", 8, cores=2)
    assert g.server_share() == pytest.approx(2 / 3)  # 2 workers and the server on 2 cores
    assert g.server_share(nodes=3) == pytest.approx(2 / 4)
    assert g.server_share(nodes=1, servers=1) == 1.0  # no more processes than cores
    assert Group("r", "net", 2, 1, 1, "colocated", 1000.0, False, "cpu", 8).server_share(nodes=8) == 1.0


def test_hosts_with_a_processor_share_of_their_own_do_not_share_the_machine_cores():
    # the testbed's hosts with `--host-cpus`: each has its processor whatever the host count (issue 60's regime)
    frames = synthetic(TRUTH, methods=("ddp", "bsp-ps"))
    two = frames[1].assign(host_cpus=0.4)
    two.attrs.update(name="two", shaped=True, cores=2)
    runs = read_runs([two])
    (g,) = runs.groups.values()
    assert g.host_cpus == 0.4 and g.cores == 0
    assert g.server_share(nodes=4) == 1.0  # the server's host share, the same at 2 hosts as at 4
    plain = frames[1].copy()
    plain.attrs.update(name="two", shaped=True, cores=2)
    assert next(iter(read_runs([plain]).groups.values())).cores == 2  # the machine's cores shared by every host


def test_predict_calibrate_reads_two_rounds_of_one_sweep_as_one_run():
    # issue 60's inputs: the two-host sweep measured in two interleaved rounds. Given as two runs, they are one
    # (harness/predict/rounds.py): each cell the median of its rounds, and the fit the report's converges
    share = INPUTS.parent / "share" / "inputs"
    prof = []
    for w in ("bert-base-tiny", "resnet50-tiny"):
        prof += ["--profile", str(share / f"profile-{w}-c1.parquet")]
    r = _predict(
        "--calibrate", str(share / "S2"), "--calibrate", str(share / "S2-r2"), *prof,
        "--nodes", "4", "--schemes", "ddp,wfbp-ps",
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    assert "8 predictions" in r.output and "emulated-1gbit" in r.output and "emulated-200mbit" in r.output, r.output


def test_hosts_with_a_share_compute_at_the_free_core_profile_slowed_by_the_share():
    # issue 60: the share is configured and the free core's profile repeats within 3 %, while one 1-worker cell in
    # a throttled host moved by up to 21 % between rounds: the share, not the cell, sets such a run's compute
    table = pd.read_parquet(INPUTS / "profile-bert-base-tiny-c1.parquet")
    compute = profile_compute({"bert-base-tiny": table})

    def group(per_node=1, share=0.0):
        return Group("r", "net", 2, per_node, 0, "colocated", 1000.0, True, "cpu", 8, host_cpus=share)

    alone = table["forward_s"].sum() + table["backward_total_s"].iloc[0] + table["optimizer_s"].sum()
    assert compute("bert-base-tiny", group(), 0.7).iteration_s == pytest.approx(0.7)  # no share: the run's speed
    for local_s in (0.5, 0.7):  # whatever the 1-worker cell measured
        assert compute("bert-base-tiny", group(share=0.4), local_s).iteration_s == pytest.approx(alone / 0.4, rel=0.05)
    assert compute("bert-base-tiny", group(2, 0.8), 0.5).iteration_s == pytest.approx(alone * 2 / 0.8, rel=0.05)


def test_a_ps_method_on_one_worker_is_not_taken_for_the_compute_alone():
    # one worker per host: a 1-host PS cell pushes to its server; the 1-worker `local` cell is the compute
    frames = synthetic(TRUTH, methods=("ddp", "bsp-ps"))
    two = frames[1]
    one_ps = two[two["scheme"] == "local"].assign(scheme="bsp-ps", servers=1, iter_s_median=99.0)
    runs = read_runs([pd.concat([two, one_ps], ignore_index=True).rename_axis(None)])
    assert all(v < 99.0 for v in runs.local.values())


def test_runs_of_one_worker_per_host_fit_the_stacks_from_two_hosts_and_predict_four():
    # the share regime: the one-host measurement is the 1-worker cells, every method cell at 2 hosts; the stack
    # is then fitted from the two-host cells with the network, and 3 and 4 hosts follow as the truth gives them
    two = synthetic(TRUTH)[1]
    cal = calibrate_own([two], compute, lowo=False)
    assert cal.fit.converged, cal.fit.message
    assert cal.cells["error"].abs().max() < 0.03
    from harness.predict.own_calibration import fitted_network, ps_knobs
    from harness.predict.predictor import predict_rows

    for hosts in (3, 4):
        m = WORKLOADS["big"]
        truth = predict_rows(
            [m], [fitted_network(TRUTH, "net", hosts, False)], [hosts], 1, list(METHODS), 1, knobs=ps_knobs(TRUTH)
        )
        got = predict_rows([m], [cal.network("net")], [hosts], 1, list(METHODS), 1, knobs=cal.knobs(METHODS))
        err = got["iter_s_median"].to_numpy() / truth["iter_s_median"].to_numpy() - 1
        assert abs(err).max() < 0.05, (hosts, dict(zip(got["scheme"], err)))


def test_a_cluster_file_runs_its_unframed_methods_on_the_calibrated_stacks():
    # the same compute both ways (--throughput), so that only the stacks differ
    args = [*PROFILES, "--throughput", "40", "--cluster", "examples/cluster-25g.toml", "--nodes", "2"]
    plain = _predict(*args, "--schemes", "ddp,wfbp-a2a")
    cal = _predict(*args, "--schemes", "ddp,wfbp-a2a", "--calibrate", str(INPUTS / "S1"))
    assert plain.exit_code == 0 and cal.exit_code == 0, plain.output[-1500:] + cal.output[-1500:]

    def iter_s(out):
        rows = [line.split() for line in out.splitlines() if line.startswith("bert-base-tiny")]
        return {r[4]: float(r[5]) for r in rows}

    before, after = iter_s(plain.output), iter_s(cal.output)
    # ddp runs on ddlbench's own stack there: the one-node run's launches, copies and sharing cost time
    assert after["ddp"] > before["ddp"] * 1.01
    # wfbp-a2a runs on the file's Horovod stack: the calibration of ddlbench's own leaves it as the file says
    assert after["wfbp-a2a"] == pytest.approx(before["wfbp-a2a"], rel=1e-6)


def test_a_two_node_commbench_gives_the_network_and_the_one_node_run_the_stacks():
    cb = str(INPUTS / "CB-2h-1gbit")
    r = _predict(
        "--calibrate", str(INPUTS / "S1"), "--calibrate", cb, *PROFILES, "--nodes", "3", "--schemes", "ddp,bsp-ps"
    )
    assert r.exit_code == 0, r.output[-2000:]
    rows = [line.split() for line in r.output.splitlines() if line.startswith("bert-base-tiny")]
    assert {(x[1], x[2], x[4]) for x in rows} == {("emulated-1gbit", "3", "ddp"), ("emulated-1gbit", "3", "bsp-ps")}
    assert "fitted launch_s = " in r.output and "rate_gbit_s" not in r.output  # the network is measured, not fitted
    r = _predict("--calibrate", cb, *PROFILES, "--nodes", "3", "--schemes", "ddp")
    assert r.exit_code == 2 and "a commbench measures the network, not the stacks" in r.output
    assert len(r.output.strip().splitlines()) == 1, r.output
