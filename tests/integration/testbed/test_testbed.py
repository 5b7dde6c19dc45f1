"""The emulated network: real namespaces, real tbf shaping, a real 2-process gloo all-reduce across it.

    pytest -q tests/integration/testbed/test_testbed.py -s      # as root; ~40 s; -s shows the measured busbw

Measured on this machine kind (2 cores, 32 MiB all-reduce, median of 5): busbw / configured rate was
0.97 at 500 Mbit/s, 0.97 at 1 Gbit/s, 0.95 at 2 Gbit/s, and 0.43 at a forced 10 Gbit/s (the CPU limit).
The few percent below 1 are Ethernet/IP/TCP headers, which tbf counts and busbw does not.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from click.testing import CliRunner

from harness.commbench import testbed as measure
from harness.core.errors import UserError
from harness.testbed import netns, state
from helpers import ROOT, live_children, stopped_in_one_line


def _ours_left() -> list[str]:
    """Every ddlb-* namespace or root-namespace link still present."""
    ns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split("\n")
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout.split("\n")
    return [ln for ln in ns if ln.startswith("ddlb-")] + [ln for ln in links if " ddlb-" in ln]


# -- pure ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "given, mbit",
    [
        ("500mbit", 500.0),
        ("1gbit", 1000.0),
        ("10gbit", 10000.0),
        ("2.5Gbit/s", 2500.0),
        ("800", 800.0),
        (750, 750.0),
        (1.5, 1.5),
        ("100000kbit", 100.0),
        ("1e9bit", 1000.0),
        (" 1 GBIT ", 1000.0),
    ],
)
def test_parse_rate_units(given, mbit):
    assert netns.parse_rate(given) == pytest.approx(mbit)


@pytest.mark.parametrize(
    "given, says",
    [
        ("100mbps", "ambiguous"),
        ("fast", "cannot read"),
        ("10furlong", "cannot read"),
        ("0", "below"),
        ("-5mbit", "cannot read"),
        ("500kbit", "below"),
        (True, "not a rate"),
    ],
)
def test_parse_rate_refuses(given, says):
    with pytest.raises(UserError, match=says):
        netns.parse_rate(given)


def test_refuses_meaningless_rate_and_host_counts_before_touching_anything():
    before = os.path.exists(state.STATE_PATH) and Path(state.STATE_PATH).read_text()
    with pytest.raises(UserError, match=r"2 CPU cores, not the emulated link.*--force"):
        netns.up(2, "5gbit")
    with pytest.raises(UserError, match=r"2\.\.16"):
        netns.up(1, "500mbit")
    with pytest.raises(UserError, match=r"2\.\.16"):
        netns.up(17, "500mbit")
    assert (os.path.exists(state.STATE_PATH) and Path(state.STATE_PATH).read_text()) == before


def test_state_round_trips_through_json():
    s = state.plan(3, 500.0)
    assert state.from_json(state.to_json(s)) == s
    assert s.nsenter(2) == ["nsenter", "--net=/run/netns/ddlb-h2", "--"]
    assert [h.addr for h in s.hosts] == ["10.77.0.1", "10.77.0.2", "10.77.0.3"]
    assert measure.busbw_factor(2) == 1.0 and measure.busbw_factor(4) == 1.5


# -- real namespaces ------------------------------------------------------------------------------------


@pytest.mark.root
def test_refuses_when_not_root_or_tools_missing(tmp_path, monkeypatch):
    # Import as root (this Python's stdlib is not readable by others), then drop to nobody.
    code = (
        "import os\nfrom harness.testbed import netns\nos.seteuid(65534)\n"
        "try: netns.up(2, 500)\nexcept Exception as e: print(type(e).__name__, e)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=str(ROOT)).stdout
    assert out.startswith("UserError the testbed needs root"), out
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty PATH: no ip, tc or nsenter
    with pytest.raises(UserError, match=r"`ip` is not installed.*apt-get install iproute2"):
        netns.up(2, 500)


BUSBW_REPS = dict(reps=3, warmup=1)
"""All-reduces of 32 MiB timed (their median) after one untimed: the shaped rate within 10% needs no more; each
one takes 0.5 s at 500 Mbit/s (the defaults, 5 after 2, are what `ddlbench testbed measure` reports)."""


@pytest.mark.root
def test_up_status_idempotent_and_busbw_at_500mbit(clean_machine):
    s = netns.up(2, "500mbit")
    assert netns.status() == s
    assert json.loads(Path(state.STATE_PATH).read_text())["rate_mbit"] == 500.0
    again = netns.up(2, 500)
    assert again.created_unix == s.created_unix  # same config: nothing rebuilt

    # A command placed on host 1 sees only host 1's network.
    seen = subprocess.run(
        netns.host_command(1, ["ip", "-o", "-4", "addr"]), capture_output=True, text=True, timeout=10
    ).stdout
    assert f"{s.hosts[1].ifname}    inet {netns.host_addr(1)}/24" in seen and "eth0    inet 192" not in seen
    assert netns.host_addr(0) == "10.77.0.1"

    r = measure.measure_allreduce_busbw(s, **BUSBW_REPS)
    print(f"\n500 Mbit/s: busbw {r['busbw_gbit_s']:.4f} Gbit/s, ratio {r['busbw_over_rate']:.4f}, times {r['times_s']}")
    assert r["busbw_gbit_s"] == pytest.approx(r["algbw_gbit_s"])  # 2 ranks: factor 2(n-1)/n = 1
    assert 0.9 <= r["busbw_over_rate"] <= 1.1, r


@pytest.mark.root
def test_busbw_tracks_1gbit_after_reconfigure(clean_machine):
    before = netns.up(2, "500mbit")
    s = netns.up(2, "1gbit")  # a different config: torn down and rebuilt
    assert s.created_unix > before.created_unix and netns.status() == s
    r = measure.measure_allreduce_busbw(s, **BUSBW_REPS)
    print(f"\n1 Gbit/s: busbw {r['busbw_gbit_s']:.4f} Gbit/s, ratio {r['busbw_over_rate']:.4f}, times {r['times_s']}")
    assert 0.9 <= r["busbw_over_rate"] <= 1.1, r


@pytest.mark.root
def test_sigterm_stops_testbed_measure_in_one_line_and_frees_the_testbed(clean_machine):
    """`ddlbench testbed measure` stopped while its ranks run ends as every command that runs cells does."""
    netns.up(2, "200mbit")
    proc = subprocess.Popen(
        [sys.executable, "-m", "harness.cli.main", "testbed", "measure", "--size-mb", "64", "--reps", "50"],
        start_new_session=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 120
        while not _commbench_ranks(proc.pid) and time.monotonic() < deadline:
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.2)
        ranks = _commbench_ranks(proc.pid)
        assert ranks, "the measurement never started its ranks"
        time.sleep(2.0)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
        assert stopped_in_one_line(err, proc.returncode).endswith("nothing was recorded; measure again")
        _, alive = psutil.wait_procs(ranks, timeout=15)
        assert not alive and netns.lease_holder() is None  # its ranks are gone, the testbed is free
    finally:
        # A failure above must not leave the measurement holding the testbed for the tests after this one.
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate(timeout=30)


def _commbench_ranks(pid: int) -> list:
    return live_children(pid, "harness.rank.commbench")


@pytest.mark.root
def test_three_hosts_then_down_leaves_nothing_even_after_a_crash(clean_machine):
    s = netns.up(3, "200mbit")
    assert [h.netns for h in s.hosts] == ["ddlb-h0", "ddlb-h1", "ddlb-h2"]
    ping = subprocess.run(
        netns.host_command(2, ["bash", "-c", "exec 3<>/dev/tcp/10.77.0.1/9 || true"]),
        capture_output=True,
        text=True,
        timeout=10,
    )
    assert "Connection refused" in ping.stderr  # host 0 answered (with a RST) across the bridge
    worker = subprocess.Popen(netns.host_command(2, ["sleep", "300"]), start_new_session=True)
    # What a crashed run leaves: a half-built namespace and no state file.
    subprocess.run(["ip", "netns", "add", "ddlb-h9"], check=True)
    os.remove(state.STATE_PATH)

    removed = netns.down()
    assert worker.wait(timeout=10) is not None
    assert f"process {worker.pid} in ddlb-h2" in removed
    assert {"netns ddlb-h0", "netns ddlb-h2", "netns ddlb-sw", "netns ddlb-h9"} <= set(removed)
    assert _ours_left() == []
    assert not os.path.exists(state.STATE_PATH) and netns.status() is None
    assert netns.down() == []  # safe when nothing is up


@pytest.mark.root
def test_cli_up_status_refuse_down(clean_machine):
    from harness.cli.commands.testbed import command

    cli = CliRunner()
    r = cli.invoke(command, ["up", "--hosts", "2", "--rate", "300mbit"])
    assert r.exit_code == 0, r.output
    assert "ddlb-h1" in r.output and "10.77.0.2" in r.output and "300 Mbit/s" in r.output

    r = cli.invoke(command, ["status", "--json"])
    assert json.loads(r.output)["hosts"][1]["ifname"] == "ddlb-eth0"

    r = cli.invoke(command, ["up", "--rate", "5gbit"])  # harness.cli.main turns this into one line, exit 2
    assert isinstance(r.exception, UserError) and "--force" in str(r.exception)
    assert netns.status() is not None  # a refused request leaves the running testbed alone

    r = cli.invoke(command, ["down"])
    assert r.exit_code == 0 and "netns ddlb-h0" in r.output
    r = cli.invoke(command, ["status"])
    assert r.exit_code == 0 and "no testbed is up" in r.output
    assert _ours_left() == []


@pytest.mark.root
def test_a_testbed_in_use_is_not_reshaped_or_taken_by_another_run(clean_machine):
    from harness.cli.main import cli

    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time\nfrom harness.testbed import netns\n"
            "with netns.lease('a colleague sweep'):\n    print('held', flush=True)\n"
            "    time.sleep(60)\n",
        ],
        stdout=subprocess.PIPE,
        text=True,
        cwd=str(ROOT),
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        assert netns.lease_holder() == f"pid {holder.pid} (a colleague sweep)"
        for argv in (["testbed", "up", "--hosts", "2", "--rate", "500mbit"], ["testbed", "down"]):
            r = CliRunner().invoke(cli, argv)
            assert r.exit_code == 2 and f"pid {holder.pid} (a colleague sweep)" in r.output, r.output
            assert len(r.output.strip().splitlines()) == 1
        with pytest.raises(UserError, match="in use by pid"), netns.lease("a second sweep"):
            pass
    finally:
        holder.kill()
        holder.wait()
    assert netns.lease_holder() is None  # a dead holder's lock is gone with it
    with netns.lease("mine"), netns.lease("nested in the same process"):
        assert netns.lease_holder() is None


def test_cuda_workers_on_the_testbed_get_a_gpu_each_and_nccl_crosses_the_links():
    """On a GPU box, ranks in different namespaces must not share a GPU, and NCCL must not bypass the
    shaped links through peer-to-peer or shared memory (it would see one host)."""
    from harness.contracts.cell import CellSpec
    from harness.core.errors import UserError
    from harness.testbed import placement as pl
    from harness.testbed.state import Host, TestbedState

    cell = CellSpec(workload="resnet50-tiny", scheme="ddp", workers=2, nodes=2, device="cuda")
    with pytest.raises(UserError, match="need a GPU each"):
        pl.check_device(cell, gpus=1)
    pl.check_device(cell, gpus=2)
    pl.check_device(cell.with_(device="cpu"), gpus=0)
    env = pl.gpu_env(1, "ddlb-h1")
    assert env["CUDA_VISIBLE_DEVICES"] == "1" and env["NCCL_HOSTID"] == "ddlb-h1"
    assert env["NCCL_P2P_DISABLE"] == env["NCCL_SHM_DISABLE"] == env["NCCL_IB_DISABLE"] == "1"
    hosts = tuple(
        Host(i, f"ddlb-h{i}", f"/run/netns/ddlb-h{i}", f"ddlb-v{i}", f"10.0.0.{i + 1}", f"ddlb-p{i}") for i in range(2)
    )
    state = TestbedState(prefix="ddlb", rate_mbit=500.0, hosts=hosts, switch_netns="ddlb-sw", bridge="ddlb-br")
    placed = pl.testbed_placement(cell, state)
    assert [e["CUDA_VISIBLE_DEVICES"] for e in placed.envs] == ["0", "1"]
    assert {e["NCCL_HOSTID"] for e in placed.envs} == {"ddlb-h0", "ddlb-h1"}
