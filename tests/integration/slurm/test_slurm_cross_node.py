"""Cells that cross nodes on a Slurm cluster like a real one (issue 17): the netns cluster of
slurm/local/up-netns.sh gives each node its own addresses on a slow (200mbit) and a fast (1gbit) network
and a hostname resolving to 127.0.1.1. An sbatch job runs `ddlbench sweep` inside the allocation; each
cell is an srun step over both nodes, its network named by a site profile (DDLBENCH_NETWORKS).

    sudo python -m pytest -m root tests/integration/slurm/test_slurm_cross_node.py -s

Proves: every torch scheme, DDP, Horovod and DeepSpeed cross nodes (2 x 1 and 2 x 2), all ok; the
interface counters show each profile's bytes on its own link and the slow profile is slower as its link
is; a profile naming a missing interface fails its cell with that reason; a failed cell fails the job.

Every job pays seconds per sweep before its first cell (the sweep's imports, then each node's zygote), so no
cell runs twice: the fast profile's bsp-a2a cell of the slow/fast comparison is the one of the every-method
job (the `on_fast` fixture; the same cell, same settings), and each cell runs the fewest iterations its
assertions need (one warm-up, which a profiling scheme raises to its own; three measured).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from helpers import ROOT, netns_sbatch, require

pytestmark = [pytest.mark.root, pytest.mark.slow]

TORCH_SCHEMES = ["ddp", "bsp-a2a", "wfbp-a2a", "mgwfbp", "bytescheduler-a2a", "bsp-ps", "wfbp-ps", "bytescheduler-ps"]
PROFILES = {"slow": {"iface": "slow0"}, "fast": {"iface": "fast0"}, "missing": {"iface": "nope0"}}
JOB_TIMEOUT_S = 900


def _sweep(tmp: Path, name: str, **over) -> Path:
    data = {
        "name": name,
        "workloads": ["bert-base-tiny"],
        "schemes": ["ddp"],
        "backends": ["torch"],
        "workers": [2],
        "batch": 4,
        "seq_len": 32,
        "warmup": 1,
        "iters": 3,
        "timeout_s": 150,
        "device": "cpu",
        "baseline": False,
        "network": "fast",
        "servers": [1],  # one parameter server at any node count (left out: one per worker node)
        **over,
    }
    path = tmp / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _job(tmp: Path, sweeps: list[Path], tasks_per_node: int, allow_failed: bool = False) -> tuple[str, str]:
    """One sbatch job of 2 nodes running each sweep in turn; (job state, output)."""
    (tmp / "networks.yaml").write_text(yaml.safe_dump(PROFILES))
    lines = ["#!/bin/sh", f"export DDLBENCH_NETWORKS={tmp}/networks.yaml PYTHONPATH={ROOT}", "status=0"]
    for s in sweeps:
        extra = " --allow-failed-cells" if allow_failed else ""
        lines.append(
            f"{sys.executable} -m harness.cli.main sweep {s} --output {tmp}/{s.stem} --launcher srun "
            f"--no-progress{extra} || status=$?"
        )
    lines.append("exit $status")
    return netns_sbatch(
        tmp,
        "\n".join(lines) + "\n",
        "--nodes=2",
        f"--ntasks-per-node={tasks_per_node}",
        "--time=30",
        "--job-name=cross-node",
        timeout_s=JOB_TIMEOUT_S,
    )


def _summary(tmp: Path, name: str) -> pd.DataFrame:
    return pd.read_parquet(tmp / name / "summary.parquet")


def _frameworks() -> list[str]:
    from harness.contracts.backend import BACKENDS

    missing = [b for b in ("horovod", "deepspeed") if BACKENDS.get(b).available()]
    require(not missing, f"cross-node framework cells: {', '.join(missing)} not usable (scripts/install_frameworks.sh)")
    return ["horovod", "deepspeed"]


def _frameworks_usable() -> bool:
    from harness.contracts.backend import BACKENDS

    return not any(BACKENDS.get(b).available() for b in ("horovod", "deepspeed"))


@pytest.fixture(scope="module")
def on_fast(cluster, tmp_path_factory) -> tuple[Path, list[Path], str, str]:
    """One job of 2 nodes x 1 task on the fast profile: every torch scheme, then (where usable) Horovod and
    DeepSpeed; (its folder, its sweeps, job state, output). The every-method test asserts on all of it; the
    slow/fast test compares its slow cell with this job's bsp-a2a cell."""
    tmp = tmp_path_factory.mktemp("on-fast")
    sweeps = [_sweep(tmp, "torch", schemes=TORCH_SCHEMES)]
    if _frameworks_usable():
        sweeps.append(_sweep(tmp, "frameworks", schemes=["horovod", "zero2"], backends=["horovod", "deepspeed"]))
    state, out = _job(tmp, sweeps, tasks_per_node=1)
    return tmp, sweeps, state, out


def test_every_method_crosses_two_nodes_one_task_each(on_fast):
    _frameworks()
    tmp, sweeps, state, out = on_fast
    assert [s.stem for s in sweeps] == ["torch", "frameworks"]
    frames = [_summary(tmp, s.stem) for s in sweeps]
    df = pd.concat(frames, ignore_index=True)
    print(
        df[
            [
                "scheme",
                "backend",
                "status",
                "reason",
                "iface",
                "net_check",
                "net_bytes_per_iter",
                "throughput_median",
                "rank_start",
                "startup_s",
            ]
        ].to_string()
    )
    assert state == "COMPLETED", out
    assert sorted(df["scheme"]) == sorted([*TORCH_SCHEMES, "horovod", "zero2"])
    assert (df["status"] == "ok").all(), df[["scheme", "reason"]]
    assert (df["nodes"] == 2).all()
    # the profile's interface named by every rank, and the bytes went through it
    assert (df["iface"] == "fast0").all() and (df["net_check"] == "ok").all(), df[["scheme", "net_bytes_json"]]
    # each node's zygote (in that node's namespace, reached at its own address) forked the torch ranks
    assert (frames[0]["rank_start"] == "warm").all(), frames[0][["scheme", "rank_start"]]


def test_two_tasks_per_node_and_the_ps_reduces_inside_the_node(cluster, tmp_path):
    sweeps = [
        _sweep(
            tmp_path,
            "two-per-node",
            schemes=["ddp", "bsp-ps", "bytescheduler-ps"],
            workers=[4],
            knobs={"bsp-ps": {"local_reduce": [0, 1]}},
            oversubscribe=True,
        )
    ]
    state, out = _job(tmp_path, sweeps, tasks_per_node=2)
    df = _summary(tmp_path, "two-per-node")
    print(df[["scheme", "knobs_json", "status", "reason", "net_bytes_per_iter", "plan_json"]].to_string())
    assert state == "COMPLETED", out
    assert (df["status"] == "ok").all() and (df["nodes"] == 2).all()
    ps = df[df["scheme"] == "bsp-ps"].set_index("knob_local_reduce")
    assert '"ps_local_reduce": true' in ps.loc[1, "plan_json"]
    # one copy per node crosses the link with the local reduce, one per worker without (2 per node)
    assert ps.loc[1, "net_bytes_per_iter"] < 0.7 * ps.loc[0, "net_bytes_per_iter"]


def test_slow_and_fast_profiles_differ_as_their_links_and_a_missing_interface_fails(on_fast, cluster, tmp_path):
    sweeps = [
        _sweep(tmp_path, "on-slow", schemes=["bsp-a2a"], network="slow"),
        _sweep(tmp_path, "on-missing", schemes=["bsp-a2a"], network="missing"),
    ]
    state, out = _job(tmp_path, sweeps, tasks_per_node=1)
    assert state == "FAILED", out  # the missing interface's sweep exits 1: Slurm marks the job FAILED
    fast_dir = on_fast[0]
    fast = _summary(fast_dir, "torch").set_index("scheme").loc["bsp-a2a"]
    slow, missing = _summary(tmp_path, "on-slow").iloc[0], _summary(tmp_path, "on-missing").iloc[0]
    # the fast profile's cell is the every-method job's bsp-a2a cell: the slow one's settings, but the network
    same = ["workload", "backend", "workers", "nodes", "batch_per_worker", "seq_len", "warmup", "iters", "knobs_json"]
    assert slow[same].tolist() == fast[same].tolist() and (slow.network, fast.network) == ("slow", "fast")
    print(
        f"slow: {slow.iter_s_median:.3f} s/iter, {slow.net_bytes_per_iter:.3g} B/iter on {slow.iface}; "
        f"fast: {fast.iter_s_median:.3f} s/iter, {fast.net_bytes_per_iter:.3g} B/iter on {fast.iface}"
    )
    assert slow.status == fast.status == "ok"
    assert (slow.iface, slow.net_main_iface, slow.net_check) == ("slow0", "slow0", "ok")
    assert (fast.iface, fast.net_main_iface, fast.net_check) == ("fast0", "fast0", "ok")
    # the same bytes cross either link; the slow one (1/5 of the rate) makes the iteration slower
    assert abs(slow.net_bytes_per_iter / fast.net_bytes_per_iter - 1) < 0.2
    assert slow.iter_s_median > 1.5 * fast.iter_s_median
    assert missing.status == "failed" and "nope0 does not exist" in missing.reason, missing.reason
    assert os.path.exists(tmp_path / "on-missing" / "summary.parquet")


def test_commbench_and_advise_measure_the_network_between_the_nodes(cluster, tmp_path):
    """Inside an allocation `ddlbench commbench` and advise's network measurement run as a job step over
    the allocation's nodes (launchers/srun/launcher.py: run_module), not on the first node's loopback: one rank on
    each node, and busbw under the shaped 1 Gbit/s link; advise's candidates then run on both nodes."""
    (tmp_path / "networks.yaml").write_text(yaml.safe_dump(PROFILES))
    py = f"{sys.executable} -m harness.cli.main"
    lines = [
        "#!/bin/sh",
        f"export DDLBENCH_NETWORKS={tmp_path}/networks.yaml PYTHONPATH={ROOT}",
        "set -e",
        f"{py} commbench --workers 2 --min-size 1M --max-size 8M --reps 3 --output {tmp_path}/cb",
        f"{py} advise --workload bert-base-tiny --workers 2 --schemes ddp,bsp-a2a --grid default --top-k 1 "
        f"--iters 2 --max-iters 2 --rounds 0 --warmup 1 --batch 4 --seq-len 32 --output {tmp_path}/adv "
        f"--no-progress",
    ]
    state, out = netns_sbatch(
        tmp_path,
        "\n".join(lines) + "\n",
        "--nodes=2",
        "--ntasks-per-node=1",
        "--time=20",
        "--job-name=cross-node-net",
        timeout_s=JOB_TIMEOUT_S,
    )
    assert state == "COMPLETED", out
    [cell] = (tmp_path / "cb" / "commbench").iterdir()
    assert sorted((cell / "hosts.workers").read_text().split()) == ["node1", "node2"], out
    cb = pd.read_parquet(tmp_path / "cb" / "commbench.parquet")
    big = cb[cb["size_bytes"] == cb["size_bytes"].max()]
    print(
        f"commbench across the nodes: busbw {big['busbw_gbit_s'].median():.3f} Gbit/s at {big['size_bytes'].iloc[0]} B"
    )
    assert 0.05 < big["busbw_gbit_s"].median() < 1.2  # the shaped link (1 Gbit/s at most), not a loopback
    adv = tmp_path / "adv" / "advise"
    assert sorted((adv / "commbench" / "allreduce" / "hosts.workers").read_text().split()) == ["node1", "node2"]
    measured = pd.read_parquet(tmp_path / "adv" / "summary.parquet")
    assert (measured["status"] == "ok").all() and (measured["nodes"] == 2).all(), measured[["scheme", "reason"]]
    assert (
        json.loads((adv / "recommendation.json").read_text())["winner"]
        and "Slurm allocation (2 nodes)" in (adv / "report.md").read_text()
    )
