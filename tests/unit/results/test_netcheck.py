"""The proof that a cell used the network its row names (harness/results/netcheck.py): per-interface bytes
per iteration read by one rank per node, turned into summary columns and a verdict; `show` warns and
`--strict-network` fails the run on a wrong interface."""

from __future__ import annotations

import json

import pandas as pd

from harness.report.console import network_warnings
from harness.results.netcheck import network_columns


def _ranks(named: str, bytes_by_iface: list[dict]) -> list[dict]:
    return [
        {"rank": r, "host": f"node{r}", "iface": named, "net_bytes_per_iter": b} for r, b in enumerate(bytes_by_iface)
    ]


def test_bytes_through_the_named_interface_are_ok():
    ranks = _ranks("fast0", [{"fast0": [9e6, 9e6], "slow0": [2e3, 2e3], "lo": [5e6, 5e6]}, {"fast0": [9e6, 9e6]}])
    cols = network_columns(ranks, nodes=2)
    assert (cols["iface"], cols["net_main_iface"], cols["net_check"]) == ("fast0", "fast0", "ok")
    assert cols["net_bytes_per_iter"] == 36e6  # both nodes, both directions, loopback left out
    assert json.loads(cols["net_bytes_json"])["rank0@node0"]["slow0"] == [2e3, 2e3]


def test_bytes_through_another_interface_are_flagged_and_one_box_is_not_checked():
    wrong = network_columns(_ranks("ib0", [{"eth0": [9e6, 9e6], "ib0": [1e5, 1e5]}, {"eth0": [9e6, 9e6]}]), 2)
    assert wrong["net_check"] == "wrong-interface" and wrong["net_main_iface"] == "eth0"
    assert wrong["net_iface_share"] < 0.01
    one_box = network_columns(_ranks("lo", [{"lo": [1e6, 1e6]}]), 1)
    assert one_box["net_check"] == "not checked"


def test_show_warns_about_a_wrong_interface():
    summary = pd.DataFrame(
        [
            {
                "cell_id": "c1",
                "network": "ib-rdma",
                "net_check": "wrong-interface",
                "iface": "ib0",
                "net_main_iface": "eth0",
                "net_iface_share": 0.01,
            },
            {
                "cell_id": "c2",
                "network": "ib-rdma",
                "net_check": "ok",
                "iface": "ib0",
                "net_main_iface": "ib0",
                "net_iface_share": 0.99,
            },
        ]
    )
    [line] = network_warnings(summary)
    assert line.startswith("c1:") and "eth0 carried most bytes" in line and "'ib-rdma'" in line
    assert network_warnings(summary.drop(columns=["net_check"])) == []
