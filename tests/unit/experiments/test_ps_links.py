"""Bytes per host link of parameter-server cells on the testbed (experiments/ps_links/): the per-host rows read
from a run directory's counters and its report written by the experiment's command.

pytest -q tests/unit/experiments/test_ps_links.py
"""

from __future__ import annotations

import json
import subprocess
import sys

import pandas as pd

from experiments.ps_links.links import link_rows
from helpers import ROOT


def test_link_report_reads_counters_per_host(tmp_path):
    """experiments/ps_links/ on a run directory of two cells: per host bytes in gradients, and the
    PS expectation (1 each way with local reduce, one per worker on the host without)."""
    grad, rows = 1e6, []
    for cid, lr, per in (("a", 1, 1.0), ("b", 0, 2.0)):
        (tmp_path / "cells" / cid).mkdir(parents=True)
        (tmp_path / "cells" / cid / "result.json").write_text(
            json.dumps({"dist": {"rank_hosts": ["ddlb-h0", "ddlb-h0", "ddlb-h1", "ddlb-h1", "ddlb-h2"]}})
        )
        counters = {
            "rank0@box": {"ddlb-eth0": [per * grad, per * grad], "lo": [5e6, 5e6]},
            "rank2@box": {"ddlb-eth0": [per * grad, per * grad]},
        }
        rows.append(
            {
                "cell_id": cid,
                "status": "ok",
                "scheme": "bsp-ps",
                "network": "emulated-200mbit",
                "knobs_json": json.dumps({"local_reduce": lr}),
                "server_hosts": "dedicated",
                "workers_per_node": 2,
                "nodes": 2,
                "grad_bytes": grad,
                "iface": "ddlb-eth0",
                "net_bytes_json": json.dumps(counters),
                "throughput_median": 3.0,
                "iter_s_median": 2.0,
                "samples": 2,
            }
        )
    pd.DataFrame(rows).to_parquet(tmp_path / "summary.parquet")
    df = link_rows(tmp_path)
    assert list(df["host"]) == ["ddlb-h0", "ddlb-h1", "ddlb-h0", "ddlb-h1"] and list(df["local_reduce"]) == [0, 0, 1, 1]
    assert list(df["tx_grads"]) == [2.0, 2.0, 1.0, 1.0] and list(df["expected_grads_each_way"]) == [2.0, 2.0, 1.0, 1.0]
    run = subprocess.run(
        [
            *(sys.executable, "-m", "experiments.ps_links.run"),
            str(tmp_path),
            "--out",
            str(tmp_path / "rep"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    text = (tmp_path / "rep" / "README.md").read_text()
    assert "Gradient: 1.00 MB" in text and "a smoke run" in text and (tmp_path / "rep" / "links.csv").exists()
