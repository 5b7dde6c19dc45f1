"""A cell's network is resolved once (issue 24, docs/ARCHITECTURE.md "Networks"): a profile's variables
travel with the cell and every launcher applies them; a name that is no profile is refused unless it is
declared as a label; the cell id does not change."""

from __future__ import annotations

import pytest
import yaml

from harness.contracts.cell import CellSpec
from harness.contracts.placement import Placement
from harness.core.errors import UserError
from harness.experiment.cells import resolve
from harness.experiment.sweep import expand, sweep_from_dict
from harness.spawner.cell import _rank_env

CELL = dict(workload="resnet50-tiny", scheme="ddp", workers=2, device="cpu")


def test_a_profile_is_resolved_into_the_cell_and_applied_from_there(tmp_path, monkeypatch):
    site = tmp_path / "networks.yaml"
    site.write_text(yaml.safe_dump({"fast": {"iface": "fast0", "nccl_ib": False}}))
    monkeypatch.setenv("DDLBENCH_NETWORKS", str(site))
    cell = resolve(CellSpec(network="fast", **CELL))
    assert cell.network_env["GLOO_SOCKET_IFNAME"] == "fast0" and cell.network_env["NCCL_IB_DISABLE"] == "1"
    monkeypatch.delenv("DDLBENCH_NETWORKS")  # launchers never look the name up again
    env = _rank_env(cell, Placement(prefixes=(("true",), ("true",)), nodes=2))
    assert env["GLOO_SOCKET_IFNAME"] == "fast0"
    assert cell.with_(network_env={"X": "1"}).cell_id == cell.cell_id  # not part of the id
    assert CellSpec.from_json(cell.to_json()) == cell


def test_loopback_across_nodes_takes_the_route():
    cell = resolve(CellSpec(**CELL))
    assert cell.network_vars(1)["GLOO_SOCKET_IFNAME"] == "lo"
    assert cell.network_vars(2) == {}


def test_a_misspelt_profile_is_refused_and_a_declared_label_is_not():
    with pytest.raises(UserError, match=r"unknown network 'ib-rmda': known profiles are .*ib-rdma"):
        resolve(CellSpec(network="ib-rmda", **CELL))
    cfg = sweep_from_dict(
        {
            "workloads": ["resnet50-tiny"],
            "schemes": ["ddp"],
            "workers": [2],
            "device": "cpu",
            "network": "eth-10g",
            "labels": ["eth-10g"],
        }
    )
    cells = expand(cfg)
    assert {c.network for c in cells} == {"eth-10g"} and all(c.network_env == {} for c in cells)
    assert resolve(cells[-1]) == cells[-1]  # resolved once: resolving again keeps it
    with pytest.raises(UserError, match="unknown network 'eth-10g'"):
        expand(sweep_from_dict({"workloads": ["resnet50-tiny"], "network": "eth-10g"}))
