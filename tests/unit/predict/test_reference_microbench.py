"""The microbenchmarks behind the study cluster's GIL and ZeroMQ-van inputs (scripts/reference/gil_handoff.py,
zmq_van.py), each run in its short form as a user would: the command exits 0, writes its JSON, and the figures
are the ones the inputs rest on (a spinner that keeps the GIL makes a waiter wait about the switch interval, one
that gives it up does not; one ZeroMQ I/O thread moves partitions both ways).

    pytest -q tests/unit/predict/test_reference_microbench.py
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
SCRIPTS = ROOT / "scripts" / "reference"


def _run(script: str, *args: str, timeout: int = 240) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(SCRIPTS / script), *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout
    )


def test_gil_handoff_quick_shows_the_forced_switch_and_the_hand_off(tmp_path):
    out = tmp_path / "gil.json"
    r = _run("gil_handoff.py", "--quick", "--out", str(out))
    assert r.returncode == 0, r.stderr
    res = json.loads(out.read_text())
    keep = {h["switch_ms"]: h["median_s"] for h in res["handoff"] if h["poll"] == "keeps GIL"}
    free = {h["switch_ms"]: h["median_s"] for h in res["handoff"] if h["poll"] != "keeps GIL"}
    assert set(keep) == {1.0, 5.0}
    # against a spinner that never gives the GIL up a waiter waits for the forced switch: about the interval
    assert keep[5.0] >= 0.8 * 5e-3 and keep[1.0] >= 0.8 * 1e-3
    assert keep[5.0] > keep[1.0]
    # one that gives it up at every poll hands it over far sooner than the switch interval
    assert free[5.0] < 0.5 * keep[5.0]
    drain = res["drain"][0]
    assert drain["done_ms"] == 2.0 and drain["median_s"] < 0.8 * 5e-3  # the queue empties before the interval
    ag = res["autograd"][0]
    assert len(ag["per_hook_intervals"]) == ag["trials"] == 3 and 0.0 <= ag["convoy_share"] <= 1.0
    costs = res["python_costs"]
    assert 0 < costs["scan_step_s"] < costs["task_per_partition_s"]
    assert res["forward"]["resnet50"]["layers"] == 107 and res["forward"]["resnet50"]["per_layer"] > 1
    assert "handoff" in r.stdout and "autograd" in r.stdout


def test_zmq_van_quick_moves_partitions_both_ways_through_one_io_thread(tmp_path):
    pytest.importorskip("zmq", reason="pyzmq comes with the dev extra (pip install -e '.[dev]')")
    out = tmp_path / "van.json"
    r = _run("zmq_van.py", "--quick", "--size", "1000000", "--out", str(out))
    assert r.returncode == 0, r.stderr
    res = json.loads(out.read_text())
    modes = {x["mode"]: x for x in res["runs"]}
    assert set(modes) == {"one-way", "both"}
    assert modes["one-way"]["pushed_bytes"] > 0 and modes["one-way"]["pulled_bytes"] == 0
    assert modes["both"]["pushed_bytes"] > 0 and modes["both"]["pulled_bytes"] > 0
    assert res["both_gbyte_s_best"] > 0.05  # a loopback stream, whatever else the machine runs


def test_zmq_van_refuses_bad_arguments_in_one_line():
    pytest.importorskip("zmq", reason="pyzmq comes with the dev extra (pip install -e '.[dev]')")
    r = _run("zmq_van.py", "--size", "0")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "--size" in r.stderr
