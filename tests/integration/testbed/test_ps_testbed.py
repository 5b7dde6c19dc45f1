"""The hierarchical parameter server across emulated hosts (issue 16): 2 hosts x 2 workers, each node
reducing inside itself and pushing one copy, with 1 and 2 servers on a host of their own (dedicated) or on
the workers' hosts (colocated) (docs/ARCHITECTURE.md, "Server placement").

    pytest -q tests/integration/testbed/test_ps_testbed.py  # as root (CI is); one 3-host testbed, one sweep of 12 cells

The placement rules are pure (tested as data, with the refusals). The proof is one sweep on a 3-host
testbed whose workers use 2 hosts (`worker_hosts: 2`), so the third is spare for dedicated servers: every
cell trains DDLBENCH_STEPS steps and dumps each rank's parameters; each case then asserts, on its own,
that the cell ran where it should, that its row says so, and that training was lossless (bitwise equal on
every rank, equal within fp tolerance to one process on the concatenated batch:
tests/integration/processes/test_lossless.py).
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
import torch
from click.testing import CliRunner

from harness.contracts.cell import CellSpec
from harness.contracts.recipes.srun import Allocation
from harness.core.errors import UserError
from harness.experiment.cells import resolve
from harness.experiment.dispatch import launcher_for, run_sweep, sweep_cells
from harness.experiment.options import RunOptions
from harness.experiment.sweep import expand, sweep_from_dict
from harness.jobs.sweep_jobs import plan_jobs
from harness.launchers.srun.context import place, server_hosts_in
from harness.launchers.testbed import launcher as tb
from harness.spawner.cell import place_one_box
from harness.testbed import placement as pl
from helpers import SMALL, STEPS, check, reference

PS = ["bsp-ps", "wfbp-ps", "bytescheduler-ps"]
WL = "bert-base-tiny"
KNOBS = {
    "bsp-ps": {"local_reduce": 1},
    "wfbp-ps": {"local_reduce": 1},
    "bytescheduler-ps": {"local_reduce": 1, "partition_mb": 1.0, "credit_mb": 2.0},
}


# -- pure ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "servers, nodes, hosts, mode, want",
    [
        (1, 2, 3, "auto", [2]),  # a spare host: the server gets it
        (2, 2, 3, "auto", [2, 2]),
        (2, 2, 2, "auto", [0, 1]),  # none spare: the workers' hosts
        (1, 2, 3, "dedicated", [2]),
        (2, 2, 4, "dedicated", [2, 3]),
        (2, 2, 3, "colocated", [0, 1]),  # asked to share although a host is spare
    ],
)
def test_server_hosts_rule(servers, nodes, hosts, mode, want):
    assert pl.server_hosts(servers, nodes, hosts, mode) == want


def test_dedicated_without_a_spare_host_is_refused():
    with pytest.raises(UserError, match=r"needs a host without workers.*testbed of 2 hosts with workers on 2"):
        pl.rank_hosts(4, 1, 2, 2, mode="dedicated")
    alloc = Allocation("7", ("n1", "n2"), 2, (2, 2))
    cell = resolve(
        CellSpec(workload=WL, scheme="bsp-ps", workers=4, nodes=2, servers=1, device="cpu", server_hosts="dedicated")
    )
    with pytest.raises(UserError, match="allocation 7 has 2 node"):
        place(cell, alloc)
    with pytest.raises(UserError, match="one box has none"):
        place_one_box(cell)


def test_workers_per_host_and_dedicated_hosts_on_the_testbed():
    ps = resolve(CellSpec(workload=WL, scheme="wfbp-ps", workers=4, servers=2, device="cpu"))
    # `run --testbed` over 2 hosts with 4 workers: 2 workers per host, servers beside them
    assert pl.cell_nodes(ps, 2) == 2
    assert pl.rank_hosts(4, 2, 2, 2, mode=ps.server_hosts) == [0, 1, 0, 1, 0, 1]
    # dedicated keeps a host for the servers; so does `worker_hosts` for auto
    assert pl.cell_nodes(ps.with_(server_hosts="dedicated"), 3) == 2
    assert pl.cell_nodes(ps, 3) == 3 and pl.cell_nodes(ps, 3, worker_hosts=2) == 2
    assert pl.rank_hosts(4, 2, 2, 3, mode="auto") == [0, 1, 0, 1, 2, 2]


def test_slurm_placement_follows_server_hosts():
    alloc = Allocation("7", ("n1", "n2", "n3"), 2, (2, 2, 2))
    cell = resolve(CellSpec(workload=WL, scheme="bsp-ps", workers=4, nodes=2, servers=2, device="cpu"))
    assert (
        place(cell, alloc) == (["n1", "n1", "n2", "n2"], ["n3", "n3"]) and server_hosts_in(cell, alloc) == "dedicated"
    )
    co = cell.with_(server_hosts="colocated")
    assert place(co, alloc) == (["n1", "n1", "n2", "n2"], ["n1", "n2"]) and server_hosts_in(co, alloc) == "colocated"
    assert server_hosts_in(cell.with_(servers=0), alloc) == ""
    # `ddlbench slurm submit` asks for the spare node a dedicated sweep needs
    sweep = {"workloads": [WL], "schemes": ["bsp-ps", "ddp"], "workers": [4]}
    assert [j.nodes for j in plan_jobs(sweep, Path("/tmp/r"), 3, 2)] == [2]
    assert [j.nodes for j in plan_jobs({**sweep, "server_hosts": "dedicated"}, Path("/tmp/r"), 3, 2)] == [3]
    with pytest.raises(UserError, match="one for the dedicated servers"):
        plan_jobs({**sweep, "server_hosts": "dedicated"}, Path("/tmp/r"), 2, 2)


def test_sweep_axis_cell_ids_and_refusals():
    cfg = sweep_from_dict(
        {
            "workloads": [WL],
            "schemes": ["ddp", "bsp-ps"],
            "workers": [2],
            "baseline": False,
            "server_hosts": ["dedicated", "colocated"],
            "device": "cpu",
        }
    )
    cells = expand(cfg)
    assert sorted(c.server_hosts for c in cells) == ["auto", "colocated", "dedicated"]  # ddp: not an axis
    assert len({c.cell_id for c in cells}) == 3
    # the default leaves ids of cells from before the field as they were
    plain = CellSpec(workload=WL, scheme="bsp-ps")
    assert plain.cell_id == plain.with_(server_hosts="auto").cell_id != plain.with_(server_hosts="dedicated").cell_id
    with pytest.raises(UserError, match="'ddp' has no parameter servers"):
        resolve(CellSpec(workload=WL, scheme="ddp", workers=2, device="cpu", server_hosts="dedicated"))
    with pytest.raises(UserError, match="not one of auto, dedicated, colocated"):
        resolve(CellSpec(workload=WL, scheme="bsp-ps", workers=2, device="cpu", server_hosts="elsewhere"))
    _spec, _profiles = tb.parse_testbed({"hosts": 2, "rate": "1gbit"}, None)
    with pytest.raises(UserError, match="needs a host without workers"):  # 2 hosts, both with workers
        cfg = sweep_from_dict(
            {
                "workloads": [WL],
                "schemes": ["bsp-ps"],
                "workers": [4],
                "baseline": False,
                "server_hosts": "dedicated",
                "device": "cpu",
                "testbed": {"hosts": 2, "rate": "1gbit", "worker_hosts": 2},
            }
        )
        sweep_cells(cfg, launcher_for(cfg, RunOptions()))
    with pytest.raises(UserError, match=r"worker_hosts must be an integer in 1\.\.2"):
        tb.parse_testbed({"hosts": 2, "rate": "1gbit", "worker_hosts": 3}, None)


def test_cli_refusals_are_one_line_exit_2(tmp_path):
    from harness.cli.main import cli

    for argv, says in [
        (["--scheme", "wfbp-ps", "--server-hosts", "dedicated"], "one box has none"),
        (["--scheme", "ddp", "--server-hosts", "colocated"], "has no parameter servers"),
    ]:
        r = CliRunner().invoke(
            cli, ["run", "--workload", WL, "--workers", "2", "--device", "cpu", "--output", str(tmp_path / "x"), *argv]
        )
        assert r.exit_code == 2 and says in r.output and "Traceback" not in r.output, r.output
        assert len([ln for ln in r.output.splitlines() if ln.strip()]) == 1, r.output


# -- real namespaces -------------------------------------------------------------------------------------

CASES = [(s, n, where) for s in PS for n in (1, 2) for where in ("dedicated", "colocated")]


@pytest.fixture(scope="module")
def ps_sweep(clean_machine, tmp_path_factory):
    """One sweep of every case on a 3-host, 1 Gbit/s testbed (workers on hosts 0 and 1): (summary, run dir)."""
    mp = pytest.MonkeyPatch()
    mp.setenv("DDLBENCH_STEPS", str(STEPS))
    mp.setenv("DDLBENCH_DUMP_PARAMS", "1")
    try:
        cfg = sweep_from_dict(
            {
                "name": "ps-testbed",
                "testbed": {"hosts": 3, "rate": "1gbit", "worker_hosts": 2},
                "workloads": [WL],
                "schemes": PS,
                "workers": [4],
                "servers": [1, 2],
                "server_hosts": ["dedicated", "colocated"],
                "knobs": KNOBS,
                "baseline": False,
                "device": "cpu",
                "timeout_s": 300,
                **SMALL[WL],
            }
        )
        run_dir = run_sweep(cfg, RunOptions(output=tmp_path_factory.mktemp("ps") / "run", progress=False))
    finally:
        mp.undo()
    return pd.read_parquet(run_dir / "summary.parquet"), run_dir


@pytest.fixture(scope="module")
def ref():
    return reference(WL, 4, SMALL[WL]["batch"], SMALL[WL]["seq_len"], STEPS)


@pytest.mark.root
@pytest.mark.slow
@pytest.mark.parametrize("scheme, servers, where", CASES)
def test_hierarchical_ps_across_hosts_is_lossless(ps_sweep, ref, scheme, servers, where):
    summary, run_dir = ps_sweep
    row = summary[(summary["scheme"] == scheme) & (summary["servers"] == servers) & (summary["server_hosts"] == where)]
    assert len(row) == 1, summary[["scheme", "servers", "server_hosts", "status"]].to_string()
    r = row.iloc[0]
    assert r["status"] == "ok", f"{r['reason']}\n{r['log_tail']}"
    assert r["nodes"] == 2 and r["workers_per_node"] == 2 and json.loads(r["knobs_json"])["local_reduce"] == 1
    cell_dir = run_dir / "cells" / r["cell_id"]
    result = json.loads((cell_dir / "result.json").read_text())
    hosts = result["dist"]["rank_hosts"]
    assert hosts[:4] == ["ddlb-h0", "ddlb-h1", "ddlb-h0", "ddlb-h1"]  # 2 workers on each of 2 hosts
    assert hosts[4:] == (["ddlb-h2"] * servers if where == "dedicated" else ["ddlb-h0", "ddlb-h1"][:servers])
    assert result["plan"]["ps_groups"] == [[0, 2], [1, 3]]  # each node reduces inside itself
    params = [torch.load(cell_dir / f"params.rank{k}.pt") for k in range(4)]
    check(params, ref, WL)
