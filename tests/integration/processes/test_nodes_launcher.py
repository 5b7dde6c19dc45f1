"""The multi-node launcher for clusters without Slurm (harness/launchers/nodes/launcher.py): `ddlbench sweep` run on
every node, as Kubeflow's PyTorchJob/Trainer, JobSet, SkyPilot and `torchrun --nnodes` start it.

    pytest -q tests/integration/processes/test_nodes_launcher.py     # as root (CI is): a 2-host testbed, ~4 minutes

Pure: the scheduler's variables and where each rank runs. Real: two emulated hosts (network namespaces
with their own addresses, a shaped 1 Gbit/s link), each running `ddlbench sweep` with its own PET_* (or
SKYPILOT_*) variables: every torch scheme and DDP across the hosts, losslessly, with the rows the other
launchers write; a node that never joins; a node lost mid-sweep, then --resume; the leader killed. The job
secret (no root, both nodes on this box): a signed job runs, an open one warns once per node, a forged cell is
refused in one line and runs nothing.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import torch
import torch.distributed as dist
import yaml

from harness.contracts.cell import CellSpec
from harness.core.errors import UserError
from harness.core.schema import SUMMARY_COLUMNS
from harness.experiment.cells import resolve
from harness.launchers.nodes.env import cell_nodes, node_job, rank_nodes
from harness.launchers.nodes.secret import open_note, seal
from harness.procs.env import SECRET_VAR
from harness.procs.ports import free_port
from harness.testbed import netns
from helpers import SMALL, STEPS, check, live_children, rank_pids, shared_reference

WL = "bert-base-tiny"
TORCH_SCHEMES = [
    "ddp",
    "bsp-a2a",
    "wfbp-a2a",
    "mgwfbp",
    "bytescheduler-a2a",
    "bsp-ps",
    "wfbp-ps",
    "bytescheduler-ps",
    "dear",
    "fsdp",
]


# -- pure ----------------------------------------------------------------------------------------------


def test_kubeflow_variables():
    job = node_job(
        {
            "PET_NNODES": "3",
            "PET_NODE_RANK": "2",
            "PET_NPROC_PER_NODE": "4",
            "PET_MASTER_ADDR": "job-master-0",
            "PET_MASTER_PORT": "23456",
        }
    )
    assert (job.nnodes, job.node_rank, job.nproc_per_node, job.master_addr, job.master_port, job.source) == (
        3,
        2,
        4,
        "job-master-0",
        23456,
        "kubeflow",
    )


def test_elastic_kubeflow_takes_the_rendezvous_endpoint_and_the_maximum():
    job = node_job(
        {
            "PET_NNODES": "1:4",
            "PET_NODE_RANK": "1",
            "PET_NPROC_PER_NODE": "auto",
            "PET_RDZV_BACKEND": "c10d",
            "PET_RDZV_ENDPOINT": "trainer-node-0:29500",
        }
    )
    assert (job.nnodes, job.master_addr, job.master_port, job.nproc_per_node) == (4, "trainer-node-0", 29500, 0)


def test_jobset_completion_index_is_the_node_rank():
    job = node_job({"JOB_COMPLETION_INDEX": "1", "PET_NNODES": "2", "PET_MASTER_ADDR": "js-0.svc"})
    assert job.node_rank == 1 and job.nnodes == 2


def test_skypilot_variables():
    job = node_job(
        {
            "SKYPILOT_NODE_IPS": "10.1.0.4\n10.1.0.5\n",
            "SKYPILOT_NODE_RANK": "1",
            "SKYPILOT_NUM_NODES": "2",
            "SKYPILOT_NUM_GPUS_PER_NODE": "8",
        }
    )
    assert (job.nnodes, job.node_rank, job.master_addr, job.nproc_per_node, job.source) == (
        2,
        1,
        "10.1.0.4",
        8,
        "skypilot",
    )
    assert (
        node_job(
            {
                "SKYPILOT_NODE_IPS": "a\nb",
                "SKYPILOT_NODE_RANK": "0",
                "SKYPILOT_NUM_NODES": "2",
                "SKYPILOT_NUM_GPUS_PER_NODE": "0",
            }
        ).nproc_per_node
        == 1
    )  # CPU nodes


def test_flags_win_and_one_node_is_not_a_job():
    job = node_job({"PET_NNODES": "2", "PET_NODE_RANK": "0", "PET_MASTER_ADDR": "a"}, {"master_addr": "b"})
    assert job.master_addr == "b"
    assert node_job({}) is None and node_job({"PET_NNODES": "1", "PET_NODE_RANK": "0"}) is None
    assert node_job({}, {"nnodes": 2, "node_rank": 1, "master_addr": "h0"}).source == "flags"


@pytest.mark.parametrize(
    "env, words",
    [
        ({"PET_NNODES": "2", "PET_NODE_RANK": "1"}, "needs --master-addr"),
        ({"PET_NNODES": "2", "PET_NODE_RANK": "2", "PET_MASTER_ADDR": "a"}, "node rank 2 is not below"),
        ({"PET_NNODES": "two", "PET_NODE_RANK": "0", "PET_MASTER_ADDR": "a"}, "PET_NNODES must be an integer"),
    ],
)
def test_bad_variables_are_one_line(env, words):
    with pytest.raises(UserError, match=words):
        node_job(env)


def test_where_ranks_run():
    cell = resolve(CellSpec(workload=WL, scheme="bsp-ps", workers=4, servers=2, device="cpu"))
    assert rank_nodes(cell, 2, 2) == ([0, 0, 1, 1, 0, 1], "colocated")  # no spare node
    assert rank_nodes(cell, 3, 2) == ([0, 0, 1, 1, 2, 2], "dedicated")  # the spare node
    assert rank_nodes(cell.with_(server_hosts="colocated"), 3, 2)[0][4:] == [0, 1]
    with pytest.raises(UserError, match="need 3 nodes at 2 per node"):
        cell_nodes(5, 2, 2)


# -- real: two emulated hosts ---------------------------------------------------------------------------------


def _sweep_file(tmp: Path, name: str, schemes, **extra) -> Path:
    f = tmp / f"{name}.yaml"
    f.write_text(
        yaml.safe_dump(
            {
                "name": name,
                "workloads": [WL],
                "schemes": list(schemes),
                "workers": [2],
                "baseline": False,
                "device": "cpu",
                "timeout_s": 300,
                **SMALL[WL],
                **extra,
            }
        )
    )
    return f


def _start(k: int, sweep: Path, out: Path, env: dict, *args: str) -> subprocess.Popen:
    argv = [sys.executable, "-m", "harness.cli.main", "sweep", str(sweep), "--output", str(out), "--no-progress", *args]
    log = open(f"{out}.node{k}.log", "a")  # noqa: SIM115 - the node's process writes it
    return subprocess.Popen(
        netns.host_command(k, argv),
        env={**os.environ, **env},
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def _kubeflow(k: int, port: int) -> dict:
    return {
        "PET_NNODES": "2",
        "PET_NODE_RANK": str(k),
        "PET_NPROC_PER_NODE": "1",
        "PET_MASTER_ADDR": netns.host_addr(0),
        "PET_MASTER_PORT": str(port),
    }


def _skypilot(k: int) -> dict:
    return {
        "SKYPILOT_NODE_IPS": f"{netns.host_addr(0)}\n{netns.host_addr(1)}\n",
        "SKYPILOT_NODE_RANK": str(k),
        "SKYPILOT_NUM_NODES": "2",
        "SKYPILOT_NUM_GPUS_PER_NODE": "0",
    }


def _wait(procs, timeout: float = 600) -> list[int]:
    return [p.wait(timeout=timeout) for p in procs]


def _log(out: Path, k: int) -> str:
    return Path(f"{out}.node{k}.log").read_text()


@pytest.fixture(scope="module")
def hosts(clean_machine):
    netns.up(2, "1gbit")
    yield
    netns.down()


@pytest.fixture(scope="module")
def every_scheme(hosts, tmp_path_factory):
    """One sweep of every torch scheme and DDP over 2 hosts x 1 worker, started Kubeflow's way."""
    tmp = tmp_path_factory.mktemp("nodes")
    sweep, out = _sweep_file(tmp, "nodes", TORCH_SCHEMES), tmp / "run"
    steps = {"DDLBENCH_STEPS": str(STEPS), "DDLBENCH_DUMP_PARAMS": "1"}
    procs = [_start(k, sweep, out, {**_kubeflow(k, 29411), **steps}) for k in (0, 1)]
    codes = _wait(procs)
    assert codes == [0, 0], _log(out, 0)[-3000:] + _log(out, 1)[-3000:]
    return out, pd.read_parquet(out / "summary.parquet")


@pytest.mark.root
@pytest.mark.slow
@pytest.mark.parametrize("scheme", TORCH_SCHEMES)
def test_every_torch_scheme_crosses_hosts_losslessly(every_scheme, scheme):
    out, summary = every_scheme
    row = summary[summary["scheme"] == scheme].iloc[0]
    assert row["status"] == "ok", f"{row['reason']}\n{row['log_tail']}"
    assert row["nodes"] == 2 and row["net_check"] == "ok", row[["nodes", "iface", "net_main_iface", "net_check"]]
    assert row["dist_backend"] == "gloo"
    result = json.loads((out / "cells" / row["cell_id"] / "result.json").read_text())
    assert result["dist"]["source"] == "nodes" and result["dist"]["nodes"] == 2
    params = [
        torch.load(out / "cells" / row["cell_id"] / "params.rank0.pt"),
        torch.load(Path(f"{out}.node1") / row["cell_id"] / "params.rank1.pt"),
    ]
    check(params, shared_reference(WL, 2, SMALL[WL]["batch"], SMALL[WL]["seq_len"], STEPS), WL)


@pytest.mark.root
@pytest.mark.slow
def test_rows_are_the_other_launchers_rows(every_scheme):
    out, summary = every_scheme
    assert set(SUMMARY_COLUMNS) <= set(summary.columns)
    env = pd.read_parquet(out / "environment.parquet").iloc[0]
    assert env["hosts"] == "2 nodes (kubeflow)"
    ps = summary[summary["scheme"].str.endswith("-ps")]
    assert set(ps["server_hosts"]) == {"colocated"}  # no spare node: the servers sit beside the workers


@pytest.mark.root
@pytest.mark.slow
def test_a_node_that_never_joins_ends_the_sweep(hosts, tmp_path):
    sweep, out = _sweep_file(tmp_path, "alone", ["ddp"]), tmp_path / "run"
    t0 = time.monotonic()
    leader = _start(0, sweep, out, _skypilot(0), "--join-timeout", "3")
    assert leader.wait(timeout=120) == 1
    assert time.monotonic() - t0 < 60
    log = _log(out, 0)
    assert "node(s) 1 of 2 never joined within 3 s (skypilot" in log and "Traceback" not in log


def _ranks_of(path: Path) -> list[int]:
    """The live ranks of the run at `path` on every node (their logs are under `path` and `path.nodeK`,
    beside it in the test's own folder; conftest.rank_pids)."""
    return rank_pids(path.parent)


def _wait_for(pred, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


@pytest.mark.root
@pytest.mark.slow
def test_a_node_lost_mid_sweep_fails_its_cell_then_resume(hosts, tmp_path, monkeypatch):
    monkeypatch.setenv("DDLBENCH_NODE_LOST_S", "4")
    sweep = _sweep_file(tmp_path, "lost", ["ddp", "bsp-a2a", "wfbp-a2a"], warmup=0, iters=16)
    out = tmp_path / "run"
    # the ddp cell still runs when node 1 goes: its rank 1 sleeps 0.5 s in each of its 16 iterations (the
    # other cells, measured after --resume, run at full speed)
    slow = {"DDLBENCH_FAULT": "slow:1:0.5:ddp"}
    procs = [_start(k, sweep, out, {**_kubeflow(k, 29412), **slow}) for k in (0, 1)]
    _wait_for(lambda: any(Path(f"{out}.node1").glob("*/rank1.log")), 120, "node 1's first rank")
    time.sleep(2)
    os.killpg(procs[1].pid, signal.SIGKILL)  # the node goes away: its agent, and with it its ranks
    assert procs[0].wait(timeout=120) == 1
    s = pd.read_parquet(out / "summary.parquet")
    assert len(s) == 1 and s.iloc[0]["status"] == "failed", s[["scheme", "status", "reason"]]
    assert "node(s) 1 lost" in s.iloc[0]["reason"]
    assert "--resume" in _log(out, 0).splitlines()[-1]
    # the node is back: the same command with --resume measures what is missing, keeps what was recorded
    procs = [_start(k, sweep, out, _kubeflow(k, 29413), "--resume") for k in (0, 1)]
    assert _wait(procs) == [1, 0]  # the leader: 1, the failed cell stays recorded (--retry-failed re-runs it)
    s = pd.read_parquet(out / "summary.parquet")
    assert len(s) == 3 and sorted(s["status"]) == ["failed", "ok", "ok"]


@pytest.mark.root
@pytest.mark.slow
def test_the_leaders_death_ends_every_rank(hosts, tmp_path):
    sweep = _sweep_file(tmp_path, "dead", ["wfbp-a2a"], warmup=0, iters=2000)
    out = tmp_path / "run"
    procs = [_start(k, sweep, out, _kubeflow(k, 29414)) for k in (0, 1)]
    _wait_for(lambda: len(_ranks_of(out)) == 2, 120, "both ranks running")
    os.killpg(procs[0].pid, signal.SIGKILL)
    t0 = time.monotonic()
    assert procs[1].wait(timeout=30) == 1
    _wait_for(lambda: not _ranks_of(out), 10, "no rank left on any node")
    assert time.monotonic() - t0 < 15
    assert "lost node 0" in _log(out, 1)


# -- the job secret (harness/launchers/nodes/secret.py): two nodes on this box, no namespaces -----------------


def _on_box(k: int, sweep: Path, out: Path, port: int, env: dict, *args: str) -> subprocess.Popen:
    """Node k of a 2-node job whose nodes both run on this box (node 0 at 127.0.0.1:port)."""
    argv = [sys.executable, "-m", "harness.cli.main", "sweep", str(sweep), "--output", str(out), "--no-progress"]
    argv += ["--nnodes", "2", "--node-rank", str(k), "--master-addr", "127.0.0.1", "--master-port", str(port)]
    log = open(f"{out}.node{k}.log", "a")  # noqa: SIM115 - the node's process writes it
    clean = {n: v for n, v in os.environ.items() if n != SECRET_VAR and not n.startswith(("PET_", "SKYPILOT_"))}
    return subprocess.Popen(
        [*argv, *args], env={**clean, **env}, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )


def _secret_file(tmp: Path, text: str = "s" * 40) -> Path:
    f = tmp / "job.secret"
    f.write_text(text + "\n")
    f.chmod(0o600)
    return f


@pytest.mark.parametrize("signed", [True, False], ids=["signed", "open"])
def test_a_job_runs_with_its_secret_and_an_open_one_warns_once(tmp_path, signed):
    """The smallest job: a 1-worker cell on node 0, node 1 opening its cell/0 and running none of it. Signed:
    node 0's secret from the variable, node 1's from the file. Open: each node says so in one line."""
    sweep, out, port = _sweep_file(tmp_path, "secret", ["ddp"], workers=[1]), tmp_path / "run", free_port()
    env = {SECRET_VAR: "s" * 40} if signed else {}
    flags = ("--secret-file", str(_secret_file(tmp_path))) if signed else ()
    procs = [_on_box(0, sweep, out, port, env), _on_box(1, sweep, out, port, {}, *flags)]
    assert _wait(procs, timeout=300) == [0, 0], _log(out, 0)[-3000:] + _log(out, 1)[-3000:]
    assert pd.read_parquet(out / "summary.parquet")["status"].tolist() == ["ok"]
    for k in (0, 1):
        warned = [line for line in _log(out, k).splitlines() if "no job secret" in line]
        assert warned == ([] if signed else [warned[0]]), _log(out, k)
        if not signed:
            assert warned[0].startswith(f"warning: node {k}: ") and f"127.0.0.1:{port}" in warned[0]


@pytest.mark.parametrize("forger", [None, b"f" * 40], ids=["unsigned", "wrong-secret"])
def test_a_forged_cell_is_refused_in_one_line_and_nothing_runs(tmp_path, forger):
    """The test holds node 0's store, as a stranger who reached its port would, and writes a cell/0 that puts
    a rank on node 1: unsigned, or signed with another secret (for node 1's own nonce). Node 1 refuses it in
    one line naming the store, exits 2, starts no rank, and tells node 0 why."""
    sweep, out, port = _sweep_file(tmp_path, "forged", ["ddp"]), tmp_path / "run", free_port()
    store = dist.TCPStore("127.0.0.1", port, is_master=True, wait_for_workers=False)
    agent = _on_box(1, sweep, out, port, {}, "--secret-file", str(_secret_file(tmp_path)))
    _wait_for(lambda: store.check(["node/1"]), 120, "node 1 joining")
    nonce = json.loads(store.get("node/1"))["nonce"]
    cell = json.loads(resolve(CellSpec(workload=WL, scheme="ddp", workers=2, device="cpu", **SMALL[WL])).to_json())
    value = {"cell": cell, "port": free_port(), "nodes": [0, 1], "master": "127.0.0.1"}
    store.set("cell/0", seal(forger, 0, value, {1: nonce}))
    seen = []
    while agent.poll() is None:
        seen += rank_pids(tmp_path) + [p.pid for p in live_children(agent.pid, "-m harness.rank.worker")]
        time.sleep(0.05)
    log = _log(out, 1)
    assert agent.returncode == 2, log
    assert not seen and not list(tmp_path.rglob("rank*.log")), (seen, log)
    errors = [line for line in log.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "Traceback" not in log, log
    assert errors[0].startswith(f"error: node 1 refused cell 0 from the store at 127.0.0.1:{port}: "), log
    # node 1's notes, signed with its secret and nonce: what node 0 would read (harness/launchers/nodes/secret.py)
    key, nonces = _secret_file(tmp_path).read_bytes().strip(), {"1": nonce}
    done = open_note(key, store.get("done/0/1"), "done/0/1", nonces)
    assert done["refused"] and not done["ok"]
    assert "refused cell 0" in open_note(key, store.get("fail/0"), "fail/0", nonces)["reason"]
