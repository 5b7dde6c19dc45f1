"""Runs and sweeps on the emulated testbed: real ranks in real namespaces over real tbf-shaped links.

    pytest -q tests/integration/testbed/test_testbed_runs.py -s  # as root; a few minutes (most of it is ranks importing
                                                 # transformers); -s prints the measured iteration times

Covers: every method completes across 2 hosts and its row says which emulated network it ran on; the
1-worker baseline runs on host 0; `ddlbench run --testbed`; a 2-profile sweep keeps both networks' cells
in one run directory and resumes across profiles; at 100 Mbit/s bert-base-tiny's gradients visibly cross
the shaped link (tbf byte counters, and an iteration far slower than the comm-free baseline);
`testbed down` leaves nothing behind.
"""

from __future__ import annotations

import json
import os
import subprocess

import pandas as pd
import pytest
from click.testing import CliRunner

from harness.contracts.cell import CellSpec
from harness.contracts.launcher import LaunchRequest
from harness.core.errors import UserError
from harness.experiment.dispatch import on_network, run_sweep
from harness.experiment.options import RunOptions
from harness.experiment.sweep import sweep_from_dict
from harness.launchers.choose import choose_launcher
from harness.launchers.testbed.launcher import parse_testbed
from harness.networks.profiles import rate_label
from harness.testbed import netns, state
from harness.testbed import placement as pl

METHODS = ["ddp", "bsp-a2a", "wfbp-a2a", "mgwfbp", "bytescheduler-a2a", "bsp-ps", "wfbp-ps", "bytescheduler-ps"]
TINY = dict(warmup=1, iters=3, batch=2, timeout_s=240)  # every cell: seconds of work, bounded if it hangs


def _summary(run_dir) -> pd.DataFrame:
    return pd.read_parquet(run_dir / "summary.parquet")


def _result(run_dir, cell_id) -> dict:
    return json.loads((run_dir / "cells" / cell_id / "result.json").read_text())


def _failures(summary: pd.DataFrame) -> str:
    bad = summary[summary["status"] != "ok"]
    return "\n".join(f"{r.cell_id}: {r.reason}\n{r.log_tail}" for r in bad.itertuples())


def _tbf_sent_bytes(netns_name: str, dev: str) -> int:
    out = subprocess.run(
        ["tc", "-n", netns_name, "-s", "-j", "qdisc", "show", "dev", dev], capture_output=True, text=True, timeout=10
    ).stdout
    return sum(q.get("bytes", 0) for q in json.loads(out or "[]") if q.get("kind") == "tbf")


# -- pure -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "workers, servers, nodes, hosts, policy, want",
    [
        (2, 0, 2, 2, "round-robin", [0, 1]),
        (4, 0, 2, 2, "round-robin", [0, 1, 0, 1]),
        (4, 0, 2, 2, "blocked", [0, 0, 1, 1]),
        (5, 0, 4, 4, "blocked", [0, 0, 1, 2, 3]),  # balanced blocks: every host gets a worker
        (2, 1, 2, 2, "round-robin", [0, 1, 0]),  # no spare host: the server shares host 0
        (2, 1, 2, 3, "round-robin", [0, 1, 2]),  # a spare host: the server gets it
        (2, 3, 2, 4, "round-robin", [0, 1, 2, 3, 2]),  # servers spread over the spare hosts
        (1, 0, 1, 2, "round-robin", [0]),  # the local baseline: host 0
    ],
)
def test_rank_hosts(workers, servers, nodes, hosts, policy, want):
    assert pl.rank_hosts(workers, servers, nodes, hosts, policy) == want
    assert pl.nodes_for(workers, hosts) == min(workers, hosts)


def test_placement_env_and_prefixes():
    s = state.plan(3, 500.0)
    cell = CellSpec(workload="bert-base-tiny", scheme="bsp-ps", workers=3, servers=1, nodes=2)
    p = pl.testbed_placement(cell, s)
    assert p.master_addr == "10.77.0.1" and p.nodes == 2
    assert [pr[1] for pr in p.prefixes] == [
        "--net=/run/netns/ddlb-h0",
        "--net=/run/netns/ddlb-h1",
        "--net=/run/netns/ddlb-h0",
        "--net=/run/netns/ddlb-h2",
    ]
    assert all(e["GLOO_SOCKET_IFNAME"] == e["TP_SOCKET_IFNAME"] == "ddlb-eth0" for e in p.envs)
    assert [(e["NODE_RANK"], e["LOCAL_RANK"], e["LOCAL_WORLD_SIZE"]) for e in p.envs] == [
        ("0", "0", "2"),
        ("1", "0", "1"),
        ("0", "1", "2"),
        ("2", "0", "1"),
    ]
    with pytest.raises(UserError, match="testbed has 3 hosts"):
        pl.rank_hosts(4, 0, 4, 3)
    with pytest.raises(UserError, match="unknown placement 'spread'"):
        pl.rank_hosts(2, 0, 2, 2, "spread")


def test_parse_testbed_blocks():
    spec, profiles = parse_testbed({"hosts": 3, "rate": "500mbit"}, None)
    assert spec.hosts == 3 and [(p.label, p.rate_mbit) for p in profiles] == [("emulated-500mbit", 500.0)]
    spec, profiles = parse_testbed({"hosts": 2}, {"slow": {"rate": "300mbit"}, "fast": {"rate": "1gbit"}})
    assert [(p.label, p.rate_mbit) for p in profiles] == [("slow", 300.0), ("fast", 1000.0)]
    assert rate_label(1000.0) == "emulated-1gbit" and rate_label(2500.0) == "emulated-2.5gbit"
    for testbed, networks, says in [
        ({"hosts": 2}, None, "needs a rate"),
        ({"hosts": 2, "rate": "1gbit"}, {"a": {"rate": "1gbit"}}, "drop `rate`"),
        ({"hosts": 2, "speed": "1gbit"}, None, "unknown key.*speed.*hosts, rate, placement"),
        ({"hosts": 1, "rate": "1gbit"}, None, r"2\.\.16"),
        ({"hosts": 2}, {"a": {"rate": "1gbit"}, "b": {"rate": "1000mbit"}}, "same rate"),
        ({"hosts": 2}, {"a": {"bw": "1gbit"}}, "unknown key.*bw"),
        ({"hosts": 2, "rate": "5gbit"}, None, "--force"),
    ]:
        with pytest.raises(UserError, match=says):
            parse_testbed(testbed, networks)
    with pytest.raises(UserError, match="labels loopback sweeps"):
        parse_testbed({"hosts": 2, "rate": "1gbit"}, None, network="eth-10g")


# -- real namespaces ------------------------------------------------------------------------------------


@pytest.mark.root
def test_every_method_completes_across_two_hosts(clean_machine, tmp_path):
    cfg = sweep_from_dict(
        {
            "name": "methods",
            "testbed": {"hosts": 2, "rate": "1gbit"},
            "workloads": ["resnet50-tiny"],
            "schemes": METHODS,
            "workers": [2],
            "baseline": False,
            **TINY,
        }
    )
    run_dir = run_sweep(cfg, RunOptions(output=tmp_path / "methods", progress=False))
    s = _summary(run_dir)
    assert (s["status"] == "ok").all(), _failures(s)
    assert sorted(s["scheme"]) == sorted(METHODS)
    assert (s["network"] == "emulated-1gbit").all() and (s["network_rate_mbit"] == 1000.0).all()
    assert (s["nodes"] == 2).all() and (s["workers_per_node"] == 1).all()
    for r in s.itertuples():
        where = _result(run_dir, r.cell_id)["dist"]
        # one server per worker node (the default), no spare host: colocated, server j on host j mod nodes
        assert r.servers == (2 if r.scheme.endswith("-ps") else 0)
        want = ["ddlb-h0", "ddlb-h1"] + (["ddlb-h0", "ddlb-h1"] if r.servers else [])
        assert where["rank_hosts"] == want, (r.scheme, where)
    print("\n" + s[["scheme", "iter_s_median", "comm_wait_s"]].to_string(index=False))


@pytest.mark.root
def test_run_testbed_cli_and_traffic_crosses_the_shaped_link(clean_machine, tmp_path):
    from harness.cli.main import cli

    netns.down()
    argv = [
        "run",
        "--workload",
        "bert-base-tiny",
        "--scheme",
        "bsp-a2a",
        "--testbed",
        "--baseline",
        "--batch",
        "2",
        "--warmup",
        "1",
        "--iters",
        "2",
        "--output",
        str(tmp_path / "slow"),
    ]
    r = CliRunner().invoke(cli, argv)
    assert r.exit_code == 2 and "needs a testbed that is up" in r.output and "ddlbench testbed up" in r.output

    s = netns.up(2, "100mbit")
    before = _tbf_sent_bytes("ddlb-h1", s.hosts[1].ifname)
    r = CliRunner().invoke(cli, argv)
    assert r.exit_code == 0, r.output
    sent = _tbf_sent_bytes("ddlb-h1", s.hosts[1].ifname) - before
    summary = _summary(tmp_path / "slow").set_index("scheme")
    assert (summary["status"] == "ok").all(), _failures(summary.reset_index())
    assert (summary["network"] == "emulated-100mbit").all() and (summary["network_rate_mbit"] == 100.0).all()
    assert summary.loc["bsp-a2a", "nodes"] == 2 and summary.loc["local", "nodes"] == 1
    local_id = summary.loc["local", "cell_id"]
    assert _result(tmp_path / "slow", local_id)["dist"]["rank_hosts"] == ["ddlb-h0"]

    # Host 1 sent its share of every all-reduce through its tbf: for 2 ranks any all-reduce moves at
    # least half the gradient bytes out of each rank (reduce-scatter + all-gather); 1 + 2 iterations.
    grad = summary.loc["bsp-a2a", "grad_bytes"]
    assert sent >= 0.5 * 3 * grad, (sent, grad)
    # ... and it took the shaped time: ~17.7 MB each way at 100 Mbit/s is ~1.4 s against a ~0.1-0.5 s step.
    slow, base = summary.loc["bsp-a2a", "iter_s_median"], summary.loc["local", "iter_s_median"]
    print(
        f"\n100 Mbit/s: bsp-a2a {slow:.2f} s/iter, comm-free baseline {base:.2f} s/iter, "
        f"host 1 sent {sent / 1e6:.1f} MB (grad {grad / 1e6:.1f} MB)"
    )
    assert slow >= 2 * base, (slow, base)


@pytest.mark.root
def test_commbench_on_the_testbed_measures_the_shaped_link(clean_machine, tmp_path):
    from harness.cli.main import cli
    from harness.predict.commbench_fit import links_from_commbench, testbed_burst_bytes

    s = netns.up(2, "200mbit")
    before = _tbf_sent_bytes("ddlb-h1", s.hosts[1].ifname)
    out = tmp_path / "cb"
    r = CliRunner().invoke(
        cli,
        [
            "commbench",
            "--testbed",
            "--workers",
            "2",
            "--min-size",
            "4K",
            "--max-size",
            "8M",
            "--reps",
            "2",
            "--warmup",
            "1",
            "--output",
            str(out),
        ],
    )
    assert r.exit_code == 0, r.output
    sent = _tbf_sent_bytes("ddlb-h1", s.hosts[1].ifname) - before
    df = pd.read_parquet(out / "commbench.parquet")
    assert (df["network"] == "emulated-200mbit").all()
    assert sent >= 3 * 8 * 2**20 / 2  # host 1 sent its half of every 8 MiB all-reduce through its tbf
    big = df[df["size_bytes"] == 8 * 2**20]["busbw_gbit_s"].median()
    assert 0.85 * 0.2 < big <= 0.2, big  # at the shaped rate, not loopback speed
    link, _, fits = links_from_commbench([out], testbed_burst_bytes())
    print(
        f"\ncommbench --testbed at 200 Mbit/s: link {link.rate_gbit_s * 1000:.0f} Mbit/s, "
        f"alpha {fits[2].alpha_s * 1e3:.2f} ms, bucket {link.burst_bytes / 1e6:.2f} MB"
    )
    assert 0.85 * 0.2 < link.rate_gbit_s <= 0.2 and link.burst_bytes > 0


@pytest.mark.root
def test_two_profile_sweep_keeps_both_networks_and_resumes(clean_machine, tmp_path):
    both = {"slow": {"rate": "200mbit"}, "fast": {"rate": "1gbit"}}
    common = {
        "name": "profiles",
        "testbed": {"hosts": 2},
        "workloads": ["resnet50-tiny"],
        "schemes": ["ddp"],
        "workers": [2],
        "baseline": False,
        **TINY,
    }
    out = tmp_path / "profiles"
    # An interrupted two-profile sweep that finished only the fast profile ...
    run_sweep(sweep_from_dict({**common, "networks": {"fast": both["fast"]}}), RunOptions(output=out, progress=False))
    fast_id = _summary(out)["cell_id"].item()
    fast_mtime = (out / "cells" / fast_id / "summary.parquet").stat().st_mtime_ns
    # ... resumed: the slow profile's cell runs on a testbed reshaped to 200 Mbit/s, the fast one is kept.
    cfg = sweep_from_dict({**common, "networks": both})
    run_sweep(cfg, RunOptions(output=out, resume=True, progress=False))
    s = _summary(out)
    assert (s["status"] == "ok").all(), _failures(s)
    assert sorted(zip(s["network"], s["network_rate_mbit"])) == [("fast", 1000.0), ("slow", 200.0)]
    assert s["cell_id"].nunique() == 2 and (s["nodes"] == 2).all()
    assert (out / "cells" / fast_id / "summary.parquet").stat().st_mtime_ns == fast_mtime
    assert netns.status().rate_mbit == 200.0  # reshaped for the cell that ran, and left up

    # Resuming a finished run runs nothing and leaves the testbed alone.
    built = netns.status().created_unix
    run_sweep(cfg, RunOptions(output=out, resume=True, progress=False))
    assert netns.status().created_unix == built and len(_summary(out)) == 2


@pytest.mark.root
def test_run_testbed_refuses_a_cell_wider_than_the_testbed(clean_machine):
    """`ddlbench run --testbed` names the testbed's launcher in the registry (harness/launchers/choose.py), which
    runs on the testbed that is up: the cell takes its label and spreads over its hosts."""
    netns.up(2, "1gbit")
    launcher = choose_launcher(LaunchRequest({}, title="ddlbench run"), "testbed")
    cell = launcher.place(on_network(CellSpec(workload="bert-base-tiny", scheme="ddp", workers=4), launcher))
    assert cell.nodes == 2 and cell.network == "emulated-1gbit" and launcher.launch.hosts == 2
    assert not launcher.launch.reconfigure  # the testbed as it is: never reshaped for a cell
    with pytest.raises(UserError, match="testbed has 2 hosts"):
        pl.testbed_placement(cell.with_(nodes=3), netns.status())


@pytest.mark.root
def test_down_leaves_no_namespace_link_or_process(clean_machine):
    s = netns.up(2, "1gbit")
    sleeper = subprocess.Popen(netns.host_command(1, ["sleep", "600"], s))  # a rank that never ended
    ours = {f"net:[{os.stat(p).st_ino}]" for p in (h.netns_path for h in s.hosts)}
    netns.down()
    assert sleeper.wait(timeout=10) != 0
    names = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split()
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    assert not [n for n in names if n.startswith("ddlb-")] and " ddlb-" not in links
    inside = []
    for pid in filter(str.isdigit, os.listdir("/proc")):  # nsenter execs the rank: match by namespace
        try:
            if os.readlink(f"/proc/{pid}/ns/net") in ours:
                inside.append(pid)
        except OSError:
            pass  # the process ended meanwhile
    assert inside == [] and netns.status() is None and not os.path.exists(state.STATE_PATH)


# -- Horovod on placed ranks (nobody runs horovodrun there: harness/backends/horovod/placed.py) -----------


def test_horovod_slot_variables_follow_the_real_hosts():
    from harness.backends.horovod.placed import slot_envs

    slots, envs = slot_envs([0, 1, 0])  # round-robin: 3 workers on 2 hosts
    assert slots == "host0:2,host1:1"
    got = [
        (
            e["HOROVOD_RANK"],
            e["HOROVOD_HOSTNAME"],
            e["HOROVOD_LOCAL_RANK"],
            e["HOROVOD_LOCAL_SIZE"],
            e["HOROVOD_CROSS_RANK"],
            e["HOROVOD_CROSS_SIZE"],
        )
        for e in envs
    ]
    assert got == [
        ("0", "host0", "0", "2", "0", "2"),
        ("1", "host1", "0", "1", "1", "2"),
        ("2", "host0", "1", "2", "0", "1"),
    ]


@pytest.mark.root
def test_horovod_runs_across_two_hosts_losslessly(clean_machine, tmp_path, monkeypatch):
    """2 hosts x 2 workers: Horovod's rendezvous on host 0, its ranks in their hosts, parameters equal on
    every rank and to single-process training, and the gradient crossed the shaped link."""
    import torch

    from helpers import SMALL, STEPS, check, reference

    monkeypatch.setenv("DDLBENCH_STEPS", str(STEPS))
    monkeypatch.setenv("DDLBENCH_DUMP_PARAMS", "1")
    wl = "bert-base-tiny"
    cfg = sweep_from_dict(
        {
            "name": "hvd",
            "testbed": {"hosts": 2, "rate": "1gbit"},
            "workloads": [wl],
            "schemes": ["horovod"],
            "backends": ["horovod"],
            "workers": [4],
            "baseline": False,
            "device": "cpu",
            "timeout_s": 300,
            **SMALL[wl],
        }
    )
    run_dir = run_sweep(cfg, RunOptions(output=tmp_path / "hvd", progress=False))
    s = _summary(run_dir)
    assert (s["status"] == "ok").all(), _failures(s)
    r = s.iloc[0]
    assert r["nodes"] == 2 and r["workers_per_node"] == 2
    cell_dir = run_dir / "cells" / r["cell_id"]
    assert _result(run_dir, r["cell_id"])["dist"]["rank_hosts"] == ["ddlb-h0", "ddlb-h1", "ddlb-h0", "ddlb-h1"]
    check(
        [torch.load(cell_dir / f"params.rank{k}.pt") for k in range(4)],
        reference(wl, 4, SMALL[wl]["batch"], SMALL[wl]["seq_len"], STEPS),
        wl,
    )
    assert r["net_main_iface"] == "ddlb-eth0" and r["net_bytes_per_iter"] >= r["grad_bytes"], (
        r["net_main_iface"],
        r["net_bytes_per_iter"],
        r["grad_bytes"],
    )
