"""Rounds of one sweep file pooled (harness/predict/rounds.py): `predict --calibrate RUN --calibrate RUN-r2` and the
own calibration's report read a sweep's interleaved rounds as one run, and say how far the rounds lie apart.

pytest -q tests/unit/predict/test_rounds.py
"""

from __future__ import annotations

import math

import pandas as pd
import pytest
import yaml

from harness.predict.own_calibration import read_runs
from harness.predict.rounds import grouped, pooled, pooled_sources, round_spread


def _run(tmp_path, folder: str, sweep: str, iters: dict[tuple[str, int], float], std: float = 0.01):
    """A run directory of the testbed (sweep.yaml with a share per host) whose cells have the given median
    iterations: (scheme, workers) -> seconds; every cell on emulated-1gbit, 2 hosts."""
    d = tmp_path / folder
    d.mkdir()
    (d / "sweep.yaml").write_text(yaml.safe_dump({"name": sweep, "testbed": {"hosts": 2, "host_cpus": 0.4}}))
    rows = []
    for (scheme, workers), it in iters.items():
        rows.append(
            {
                "run_id": folder,
                "status": "ok",
                "workload": "resnet50-tiny",
                "scheme": scheme,
                "workers": workers,
                "nodes": workers,
                "workers_per_node": 1,
                "servers": 1 if scheme.endswith("-ps") else 0,
                "server_hosts": "colocated" if scheme.endswith("-ps") else "",
                "network": "emulated-1gbit",
                "network_rate_mbit": 1000.0,
                "batch_per_worker": 8,
                "seq_len": math.nan,
                "dtype": "float32",
                "device": "cpu",
                "host_cpus": 0.4,
                "iter_s_median": it,
                "iter_s_std": std,
                "throughput_median": 8 * workers / it,
                "forward_s": it / 3,
                "backward_s": it / 2,
            }
        )
    pd.DataFrame(rows).to_parquet(d / "summary.parquet")
    return d


def test_rounds_of_one_sweep_pool_to_the_median_of_their_medians(tmp_path):
    a = _run(tmp_path, "S2", "share-2host", {("local", 1): 0.50, ("ddp", 2): 1.00, ("bsp-ps", 2): 2.0})
    b = _run(tmp_path, "S2-r2", "share-2host", {("local", 1): 0.70, ("ddp", 2): 1.20, ("bsp-ps", 2): 2.2})
    other = _run(tmp_path, "S3", "share-3host", {("local", 1): 0.6, ("ddp", 3): 1.5})
    assert [len(g) for g in grouped([a, other, b])] == [2, 1]
    p = pooled([a, b])
    cell = p.set_index("scheme").loc["ddp"]
    assert cell["iter_s_median"] == pytest.approx(1.10)
    assert cell["throughput_median"] == pytest.approx((16 / 1.0 + 16 / 1.2) / 2)
    assert cell["rounds"] == 2
    # the pooled spread holds the rounds' own and the drift between them
    assert cell["iter_s_std"] == pytest.approx(math.sqrt(0.01**2 + pd.Series([1.0, 1.2]).std() ** 2))
    assert p.attrs["shaped"] and p.attrs["name"].endswith("+r2")
    # the calibration reads the pooled table as one run: the 1-worker cell at the rounds' median speed
    sources = pooled_sources([a, b, other])
    assert isinstance(sources[0], pd.DataFrame) and sources[1] == other
    runs = read_runs(sources)
    assert runs.local[(p.attrs["name"], "emulated-1gbit", "resnet50-tiny")] == pytest.approx(0.60)
    assert {g.host_cpus for g in runs.groups.values()} == {0.4}


def test_round_spread_is_per_cell_and_leaves_out_a_sweep_run_once(tmp_path):
    a = _run(tmp_path, "S2", "share-2host", {("local", 1): 0.50, ("ddp", 2): 1.00})
    b = _run(tmp_path, "S2-r2", "share-2host", {("local", 1): 0.70, ("ddp", 2): 1.00})
    once = _run(tmp_path, "S3", "share-3host", {("local", 1): 0.6, ("ddp", 3): 1.5})
    s = round_spread([a, b, once]).set_index("scheme")
    assert set(s.index) == {"local", "ddp"}
    assert s.loc["local", "spread_pct"] == pytest.approx(100 * 0.2 / 0.6)
    assert s.loc["ddp", "spread_pct"] == 0.0
    assert s.loc["ddp", "hosts"] == 2 and s.loc["local", "rounds"] == 2
