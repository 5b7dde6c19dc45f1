"""A CPU share of its own for every emulated host (harness/testbed/cgroups.py, procs/cgjoin.py).

    pytest -q tests/integration/testbed/test_host_cpus.py -s     # as root; ~1 min; -s prints the measured shares

The share test measures a CPU-bound loop's CPU time over its wall time inside host 1's group. Another load on
the machine can only take CPU away from it, never give it more, so "at most the share + 10%" is asserted
always, and "at least the share - 10%" only when an ungrouped busy loop run alongside (the reference) got more
than the share + 10% of a core, i.e. when the machine had the CPU to give and only the quota held the loop back.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from harness.core.errors import UserError
from harness.experiment.dispatch import run_sweep
from harness.experiment.options import RunOptions
from harness.experiment.sweep import sweep_from_dict
from harness.launchers.testbed.launcher import parse_testbed
from harness.procs.cgjoin import join_prefix, split_prefix
from harness.testbed import cgroups, netns, state
from harness.testbed import placement as pl
from harness.warm.spawn import netns_of
from helpers import ROOT

SHARE = 0.5
LOOP_S = 2.0
_LOOP = (
    "import os, time\n"
    "t0, c0 = time.monotonic(), sum(os.times()[:2])\n"
    f"while time.monotonic() - t0 < {LOOP_S}: pass\n"
    "print((sum(os.times()[:2]) - c0) / (time.monotonic() - t0))\n"
    "print(open('/proc/self/cgroup').read())\n"
)
"""A busy loop that prints the CPU it got: its CPU time (user + system, from /proc via os.times) over its wall
time, both from the loop's start (the interpreter's start-up is left out), then its control groups."""


# -- pure -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "given, says",
    [
        ("abc", "not a positive number"),
        ("0", "not a positive number"),
        (-0.5, "not a positive number"),
        ("nan", "not a positive number"),
        (True, "not a positive number"),
        ("0.001", "below the kernel's smallest"),
        ("1.5", "more than this machine's 2"),
    ],
)
def test_share_refused(given, says):
    with pytest.raises(UserError, match=says):
        cgroups.parse_share(given, hosts=2, cores=2)


def test_share_and_cores_accepted_within_the_machine():
    assert cgroups.parse_share("0.5", 2, cores=2) == 0.5 and cgroups.parse_share(1, 2, cores=2) == 1.0
    assert cgroups.parse_share(None, 2, cores=2) is None
    assert cgroups.parse_cores("1", 2, 0.5, cores=2) == 1
    with pytest.raises(UserError, match="3 hosts x 1 core"):
        cgroups.parse_cores(1, 3, None, cores=2)
    with pytest.raises(UserError, match="not a positive whole number"):
        cgroups.parse_cores("0.5", 2, None, cores=2)
    with pytest.raises(UserError, match="more than the host's 1 core"):
        cgroups.parse_cores(1, 2, 1.5, cores=4)


def test_sweep_file_takes_the_share_and_refuses_a_bad_one():
    spec, _ = parse_testbed({"hosts": 2, "rate": "200mbit", "host_cpus": 0.5}, None)
    assert spec.host_cpus == 0.5 and spec.host_cores is None
    with pytest.raises(UserError, match="more than this machine's"):
        parse_testbed({"hosts": 2, "rate": "200mbit", "host_cpus": 64}, None)


def test_join_prefix_round_trips_and_the_warm_spawner_reads_it():
    files = ("/cg/cpu/a/cgroup.procs", "/cg/cpuset/a/cgroup.procs")
    prefix = join_prefix(files)
    assert split_prefix((*prefix, "python", "-c", "x")) == (files, ("python", "-c", "x"))
    assert join_prefix(()) == () and split_prefix(("python",)) == ((), ("python",))
    placed = ("nsenter", "--net=/run/netns/h1", "--", *prefix)
    assert netns_of(placed) == "/run/netns/h1" and netns_of((*placed, "extra")) is None


def test_state_records_the_share_and_the_hosts_join_their_groups():
    layout = cgroups.Layout("v1", "/cg/cpu", "/cg/cpuset")
    s = state.plan(2, 200.0, host_cpus=0.5, host_cores=1, layout=layout)
    assert s.host_cpus == 0.5 and s.host_cores == 1 and s.cgroup_version == "v1"
    assert s.hosts[1].cgroups == ("/cg/cpu/ddlbench-ddlb/h1", "/cg/cpuset/ddlbench-ddlb/h1")
    assert split_prefix(s.nsenter(1)[3:])[0] == tuple(f"{d}/cgroup.procs" for d in s.hosts[1].cgroups)
    assert state.from_json(state.to_json(s)) == s
    assert state.plan(2, 200.0, host_cpus=0.5, layout=None).host_cpus is None  # no controller: no share


def test_no_cpu_controller_is_detected_in_an_empty_root(tmp_path, monkeypatch):
    monkeypatch.setenv(cgroups.CGROUP_ROOT_VAR, str(tmp_path))
    assert cgroups.detect() is None and cgroups.remove({"ddlb"}) == []
    (tmp_path / "cpu").mkdir()
    (tmp_path / "cpu" / "cpu.cfs_quota_us").write_text("-1\n")
    assert cgroups.detect() == cgroups.Layout("v1", str(tmp_path / "cpu"), None)


def test_cpu_stat_and_throttling_over_a_cell(tmp_path):
    (tmp_path / "cpu.stat").write_text("nr_periods 30\nnr_throttled 12\nthrottled_time 1500000000\n")
    assert cgroups.throttling(str(tmp_path)) == (12, 1.5)
    assert cgroups.throttling(str(tmp_path / "gone")) is None
    before, after = {"h0": (2, 0.5), "h1": (0, 0.0)}, {"h0": (12, 1.5), "h1": (3, 0.25)}
    got = pl.throttled_over(before, after, {"rank_hosts": ["h0", "h1", "h0"]})
    assert got["throttled_periods"] == 13 and got["throttled_s"] == pytest.approx(1.25)
    assert pl.throttled_over({}, {}, {"rank_hosts": ["h0"]}) == {}


def test_cli_refuses_a_share_the_machine_cannot_give_in_one_line():
    cores = cgroups.machine_cores()
    for share in (str(cores), "0", "lots"):
        p = subprocess.run(
            [sys.executable, "-m", "harness.cli.main", "testbed", "up", "--hosts", "2", "--host-cpus", share],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=str(ROOT),
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1, (share, p.stderr)
        assert "host CPU share" in p.stderr or "cores" in p.stderr


# -- real groups ----------------------------------------------------------------------------------------


def _loop(argv_prefix: list[str]) -> subprocess.Popen:
    return subprocess.Popen([*argv_prefix, sys.executable, "-c", _LOOP], stdout=subprocess.PIPE, text=True)


@pytest.mark.root
def test_a_process_in_a_hosts_group_gets_its_share(clean_machine):
    if cgroups.detect() is None:
        pytest.skip("no CPU controller on this machine")
    s = netns.up(2, "200mbit", host_cpus=SHARE)
    assert s.host_cpus == SHARE and all(cgroups.exists(h.cgroups) for h in s.hosts)
    before = cgroups.throttling(s.hosts[1].cgroups[0])
    grouped, reference = _loop(s.nsenter(1)), _loop([])
    (got, where), (ref, _) = (p.communicate(timeout=60)[0].split("\n", 1) for p in (grouped, reference))
    got, ref = float(got), float(ref)
    after = cgroups.throttling(s.hosts[1].cgroups[0])
    assert "/ddlbench-ddlb/h1\n" in where, where  # it ran in host 1's group
    print(f"\nshare {SHARE}: the grouped loop got {got:.3f} core, an ungrouped loop beside it {ref:.3f}")
    assert got <= SHARE * 1.1, got  # contention can only take CPU away: the ceiling always holds
    if ref > SHARE * 1.1:  # the machine had CPU to give: only the quota held the grouped loop back
        assert got >= SHARE * 0.9, (got, ref)
        assert after[0] > before[0] and after[1] > before[1]  # the group's cpu.stat counted the throttling
    else:
        print(f"the lower bound is not checked: the machine gave an ungrouped loop only {ref:.3f} core")
    netns.down()
    assert not any(os.path.exists(d) for h in s.hosts for d in h.cgroups)


@pytest.mark.root
def test_a_sweep_records_the_share_and_throttling_and_its_warm_ranks_are_in_the_group(clean_machine, tmp_path):
    if cgroups.detect() is None:
        pytest.skip("no CPU controller on this machine")
    cfg = sweep_from_dict(
        {
            "name": "host-cpus",
            "testbed": {"hosts": 2, "rate": "200mbit", "host_cpus": SHARE},
            "workloads": ["resnet50-tiny"],
            "schemes": ["ddp"],
            "workers": [2],
            "baseline": False,
            "warmup": 1,
            "iters": 3,
            "batch": 2,
            "timeout_s": 240,
        }
    )
    run_dir = run_sweep(cfg, RunOptions(output=tmp_path / "run", progress=False))
    s = pd.read_parquet(run_dir / "summary.parquet")
    assert (s["status"] == "ok").all(), s[["status", "reason"]]
    row = s.iloc[0]
    assert row["host_cpus"] == SHARE and row["rank_start"] == "warm"
    assert row["throttled_periods"] >= 0 and row["throttled_s"] >= 0 and "ddlb-h1" in row["throttled_json"]
    env = pd.read_parquet(run_dir / "environment.parquet").iloc[0]
    assert env["testbed_host_cpus"] == SHARE
    assert state.load().host_cpus == SHARE
    print(f"\nthrottled over the cell: {row['throttled_periods']:g} periods, {row['throttled_s']:.2f} s")


@pytest.mark.root
def test_without_a_cpu_controller_the_testbed_says_so_and_runs_without_a_share(clean_machine, tmp_path, monkeypatch):
    monkeypatch.setenv(cgroups.CGROUP_ROOT_VAR, str(tmp_path))
    monkeypatch.setattr(netns, "_noted", [])
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "harness.cli.main",
            *("testbed", "up", "--hosts", "2", "--rate", "200mbit"),
            "--host-cpus",
            "0.5",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=str(ROOT),
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert p.returncode == 0, p.stderr
    notes = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert len(notes) == 1 and "no CPU controller" in notes[0], p.stderr
    s = netns.status()
    assert s is not None and s.host_cpus is None and s.cgroup_version == "" and s.nsenter(0)[3:] == []
    assert not list(Path(tmp_path).iterdir())
