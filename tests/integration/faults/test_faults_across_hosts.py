"""Faults across hosts (README, "Faults tried"): the history store's disk filling during `history add`, a testbed
link cut during a two-host cell, a link whose shaping changes under a two-host sweep, a Slurm node drained or its
slurmd killed during a two-node sweep. Each ends in one line or a row's reason naming the link, host or node, with
the conventional exit status, keeps every row measured, leaves no process behind, and `--resume` (or the same
command again) completes once the fault is gone.

    pytest -q tests/integration/faults/test_faults_across_hosts.py   # as root (tmpfs, namespaces, slurm/local);
                                                                      # about 8 minutes
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
import psutil
import pytest
import yaml

from harness.history import store, synthetic
from harness.launchers.srun.steps import failure_reason
from helpers import LOCAL_SLURM_CPUS, ROOT, require

CELLS = ["resnet50-tiny:ddp", "bert-base-tiny:bsp-a2a", "resnet50-tiny:wfbp-a2a"]


def _cli(*args, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "harness.cli.main", *map(str, args)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.fixture
def small_disk(tmp_path):
    """A 1 MiB tmpfs of its own, unmounted after (root)."""
    mount = tmp_path / "disk"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount)], check=True)
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def _fill(disk: Path, leave: int) -> Path:
    """Fill `disk` until `leave` bytes (rounded to pages) are free; the filler file, to remove later."""
    filler = disk / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT)
    try:
        while os.write(fd, b"\0" * 4096):
            pass
    except OSError:
        os.ftruncate(fd, max(0, os.fstat(fd).st_size - leave))
    finally:
        os.close(fd)
    return filler


@pytest.mark.root
def test_the_history_disk_filling_during_add_is_one_line_and_the_store_is_as_it_was(tmp_path, small_disk):
    first, second, third = synthetic.series_runs(3, CELLS)
    runs = [synthetic.write_run_dir(t, tmp_path / name) for t, name in zip((first, second, third), "abc")]
    history = small_disk / "history"
    added = _cli("history", "add", runs[0], "--history", history)
    assert added.returncode == 0, added.stderr
    before = {p.name: p.read_bytes() for p in store.files(history)}
    batch = max(len(b) for b in before.values())
    # room for one more batch and not two: the second run's batch lands, the third's does not, and the add
    # takes the second back so that the folder is as it was
    filler = _fill(small_disk, leave=batch + 4096)
    full = _cli("history", "add", runs[1], runs[2], "--history", history)
    lines = full.stderr.strip().splitlines()
    assert full.returncode == 2 and len(lines) == 1, (full.returncode, full.stdout, full.stderr)
    assert f"nothing added to {history} (it is as it was)" in lines[0], lines
    assert "No space left on device; free space on its disk" in lines[0], lines
    assert f"(it is as it was): {runs[2]}: " in lines[0], "the second run's batch did not land first"
    assert {p.name: p.read_bytes() for p in store.files(history)} == before
    assert sorted(p.name for p in store.runs_dir(history).iterdir()) == sorted(before), "a temporary was left"
    filler.unlink()
    again = _cli("history", "add", runs[1], runs[2], "--history", history)
    assert again.returncode == 0, again.stderr
    rows, problems = store.read(history)
    assert not problems and len(rows) == 3 * len(CELLS)


# -- the testbed: a link cut, a link reshaped -------------------------------------------------------------

CUT_TIMEOUT_S = 60
"""Each cell's timeout in the link cut and Slurm tests: far above a cell's seconds of work (a cut cell no longer
waits for it: the launcher's link watch ends it, harness/testbed/links.py)."""
CUT_ENDED_WITHIN_S = 15
"""How soon after the cut the sweep must have ended: the cut cell ended within two reads of its links (a second
apart), the next failed at its start, and the sweep wrote its tables."""
RATE_CUT_TIMEOUT_S = 40
"""Each cell's timeout in the degraded-link test: what its cell under the 20 Mbit/s rate cut waits (it cannot do 200
iterations at that rate; a reshaped link never ends a cell early), and twice what a healthy cell of it takes (13-20 s
wall, start included, measured 2026-12-08 with and without a neighbour's 0.9 cores of load)."""


def _sweep_file(tmp_path: Path, name: str, schemes: list[str], iters: int, timeout_s: float = CUT_TIMEOUT_S) -> Path:
    path = tmp_path / f"{name}.yaml"
    body = {
        "name": name,
        "testbed": {"hosts": 2, "rate": "500mbit"},
        "workloads": ["resnet50-tiny"],
        "schemes": schemes,
        "workers": [2],
        "baseline": False,
        "warmup": 1,
        "iters": iters,
        "batch": 2,
        "timeout_s": timeout_s,
    }
    path.write_text(yaml.safe_dump(body))
    return path


def _start(*args) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "harness.cli.main", *map(str, args)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def _pids_in(ns: str) -> list[int]:
    out = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True).stdout
    return [int(p) for p in out.split()]


def _ranks_in(ns: str, run_dir: Path) -> set[int]:
    """The run's ranks in namespace `ns`: its processes whose command line names the run directory (the sweep's own
    `ip -n`/`tc -n` calls, which build and read the testbed, pass through the namespace too)."""
    ranks = set()
    for pid in _pids_in(ns):
        try:
            if str(run_dir) in " ".join(psutil.Process(pid).cmdline()):
                ranks.add(pid)
        except psutil.Error:  # it ended meanwhile
            pass
    return ranks


def _first_cell_running(sweep: subprocess.Popen, host: str, run_dir: Path, deadline_s: float = 120) -> None:
    """Wait until ranks run on `host`, then a few seconds more, so that the cell is past its start."""
    deadline = time.monotonic() + deadline_s
    while not _ranks_in(host, run_dir):
        assert sweep.poll() is None, sweep.communicate()
        assert time.monotonic() < deadline, f"no rank started on {host} within {deadline_s:g} s"
        time.sleep(0.2)
    time.sleep(5)


def _left_behind(marker: str) -> list[str]:
    """Processes still alive whose command line names `marker` (the run directory: ranks, zygotes, servers),
    and any process left in the testbed's host namespaces."""
    left = []
    for p in psutil.process_iter(["pid", "cmdline", "status"]):
        cmd = " ".join(p.info["cmdline"] or [])
        if marker in cmd and p.info["status"] != psutil.STATUS_ZOMBIE:
            left.append(f"{p.info['pid']} {cmd}")
    return left + [f"{pid} in {ns}" for ns in ("ddlb-h0", "ddlb-h1") for pid in _pids_in(ns)]


def _link(action: str) -> None:
    subprocess.run(["ip", "-n", "ddlb-h1", "link", "set", "ddlb-eth0", action], check=True)


@pytest.mark.root
@pytest.mark.slow
def test_a_link_cut_during_a_two_host_cell_fails_it_naming_the_link_and_resume_completes(clean_machine, tmp_path):
    sweep_file = _sweep_file(tmp_path, "cut", ["ddp", "bsp-a2a"], iters=400)
    out = tmp_path / "cut-run"
    sweep = _start("sweep", sweep_file, "--output", out)
    try:
        _first_cell_running(sweep, "ddlb-h1", out)
        cut_at = time.monotonic()
        _link("down")
        stdout, stderr = sweep.communicate(timeout=4 * CUT_TIMEOUT_S)
        took = time.monotonic() - cut_at
    finally:
        if sweep.poll() is None:
            os.killpg(sweep.pid, signal.SIGKILL)
    assert sweep.returncode == 1, (stdout, stderr)  # failed cells, the sweep went on to its end
    summary = pd.read_parquet(out / "summary.parquet").sort_values("wall_s", ascending=False)
    assert len(summary) == 2 and (summary["status"] == "failed").all(), summary[["cell_id", "reason"]]
    cut, after = summary["reason"].tolist()
    print(f"\ncut cell ({summary['wall_s'].iloc[0]:.1f} s): {cut}\nnext cell: {after}\nsweep ended {took:.1f} s after")
    assert "host ddlb-h1's link changed during the cell (ddlb-eth0 in ddlb-h1 UP -> DOWN" in cut, cut
    assert "host ddlb-h1's link went down during the cell" in cut and "timed out" not in cut, cut
    assert "host ddlb-h1's link is down" in after and "at the cell's start" in after, after
    assert took < CUT_TIMEOUT_S + 30, "the cut cell outlived its timeout"
    assert took < CUT_ENDED_WITHIN_S, f"the sweep ended {took:.1f} s after the cut: the cut cell waited for its timeout"
    assert not _left_behind(str(out)), _left_behind(str(out))

    _link("up")
    again = _cli("sweep", sweep_file, "--output", out, "--resume", "--retry-failed", timeout=600)
    assert again.returncode == 0, (again.stdout, again.stderr)
    summary = pd.read_parquet(out / "summary.parquet")
    assert len(summary) == 2 and (summary["status"] == "ok").all(), summary[["cell_id", "reason"]]
    assert not summary["reason"].str.contains("link").any(), summary["reason"].tolist()
    assert not _left_behind(str(out)), _left_behind(str(out))


def _ranks_on(
    sweep: subprocess.Popen, host: str, run_dir: Path, besides: set[int] = frozenset(), deadline_s: float = 180
) -> set[int]:
    """The ranks of the next cell on `host`: wait until it holds ranks of the run other than `besides` (the
    previous cell's)."""
    deadline = time.monotonic() + deadline_s
    while not (now := _ranks_in(host, run_dir) - besides):
        assert sweep.poll() is None, sweep.communicate()
        assert time.monotonic() < deadline, f"no new rank started on {host} within {deadline_s:g} s"
        time.sleep(0.1)
    return now


def _tc(*args) -> list[dict]:
    out = subprocess.run(["tc", "-n", "ddlb-h1", *args], capture_output=True, text=True, check=True).stdout
    return json.loads(out) if out.strip().startswith("[") else []


def _shallow_buffer_drops() -> tuple[int, int]:
    """(packets sent, packets dropped) by the pfifo under host 1's tbf."""
    qs = [q for q in _tc("-s", "-j", "qdisc", "show", "dev", "ddlb-eth0") if q.get("kind") == "pfifo"]
    return (qs[0]["packets"], qs[0]["drops"]) if qs else (0, 0)


@pytest.mark.root
@pytest.mark.slow
def test_a_degraded_link_during_a_two_host_sweep_flags_the_cells_it_changed_under(clean_machine, tmp_path):
    """This kernel has no netem (and no gact, red or sfq): loss is a shallow buffer under host 1's tbf (a
    4-packet pfifo, which drops what a burst above the rate brings: loss under load), and the latency spike is
    its rate cut to 20 Mbit/s (a 25x slower link: queueing delay and serialisation). The loss goes on during
    the first cell and stays for the second, under which the rate is cut; the third runs on the testbed the
    sweep rebuilt at its rate."""
    sweep_file = _sweep_file(
        tmp_path, "degraded", ["ddp", "bsp-a2a", "wfbp-a2a"], iters=200, timeout_s=RATE_CUT_TIMEOUT_S
    )
    out = tmp_path / "degraded-run"
    sweep = _start("sweep", sweep_file, "--output", out)
    try:
        first = _ranks_on(sweep, "ddlb-h1", out)
        time.sleep(3)
        (tbf,) = [q for q in _tc("-j", "qdisc", "show", "dev", "ddlb-eth0") if q.get("kind") == "tbf"]
        _tc("qdisc", "add", "dev", "ddlb-eth0", "parent", f"{tbf['handle']}1", "pfifo", "limit", "4")
        second = _ranks_on(sweep, "ddlb-h1", out, besides=first)
        sent, dropped = _shallow_buffer_drops()  # over the first cell's rest and the second's start
        time.sleep(3)
        _tc("qdisc", "change", "dev", "ddlb-eth0", "root", "tbf", "rate", "20mbit", "burst", "1mb", "latency", "50ms")
        _ranks_on(sweep, "ddlb-h1", out, besides=first | second)
        stdout, stderr = sweep.communicate(timeout=6 * RATE_CUT_TIMEOUT_S)
    finally:
        if sweep.poll() is None:
            os.killpg(sweep.pid, signal.SIGKILL)
    assert sweep.returncode in (0, 1), (stdout, stderr)
    summary = pd.read_parquet(out / "summary.parquet")
    print(f"\nshallow buffer: {dropped} of {sent + dropped} packets dropped ({dropped / max(1, sent + dropped):.1%})")
    for r in summary.itertuples():
        print(f"{r.cell_id}: {r.status}, {r.iter_s_median:.3f} s/iter, wall {r.wall_s:.1f} s: {r.reason}")
    assert len(summary) == 3 and summary["status"].isin(["ok", "failed"]).all()
    assert (summary["status"].eq("ok") | summary["reason"].str.len().gt(0)).all()
    changed = "host ddlb-h1's link changed during the cell"
    spiked = summary[summary["reason"].str.contains(f"{changed} .*-> tbf .*rate=20mbit", regex=True)]
    shallow = f"{changed} .*-> tbf .*rate=500mbit\\), pfifo .*limit=4"  # the pfifo added, the rate kept
    lossy = summary[summary["reason"].str.contains(shallow, regex=True)]
    clean = summary[~summary["reason"].str.contains("link")]
    assert len(lossy) == len(spiked) == len(clean) == 1, summary["reason"].tolist()
    for r in pd.concat([lossy, spiked]).itertuples():
        assert r.status == "failed" or r.reason.startswith("warning: "), r.reason
    # a reshaped link carries traffic: the link watch never ends its cell (it completes, or waits out its timeout)
    assert not summary["reason"].str.contains("went down").any(), summary["reason"].tolist()
    assert clean["status"].iloc[0] == "ok", clean["reason"].tolist()
    assert not _left_behind(str(out)), _left_behind(str(out))

    again = _cli("sweep", sweep_file, "--output", out, "--resume", "--retry-failed", timeout=600)
    assert again.returncode == 0, (again.stdout, again.stderr)
    summary = pd.read_parquet(out / "summary.parquet")
    assert len(summary) == 3 and (summary["status"] == "ok").all(), summary[["cell_id", "reason"]]
    assert not _left_behind(str(out)), _left_behind(str(out))


# -- Slurm: a node's slurmd lost during a multi-node sweep ------------------------------------------------

SLURM_UP, SLURM_DOWN = ROOT / "slurm" / "local" / "up.sh", ROOT / "slurm" / "local" / "down.sh"
SLURMD_PID = "/var/spool/ddlbench-slurm/run/slurmd-{node}.pid"
"""Where slurm/local/up.sh's slurmd of each node writes its pid (SlurmdPidFile in the slurm.conf it writes)."""


def test_a_step_that_could_not_start_on_a_node_names_the_node():
    log = (
        "srun: error: Task launch for StepId=2.1 failed on node n2: Communication connection failure\n"
        "srun: error: Application launch failed: Communication connection failure\n"
        "srun: error: n1: task 0: Killed\n"
    )
    reason, rank = failure_reason(log, 137)
    assert reason.startswith("the workers step could not start on node n2 (Communication connection failure)")
    assert "`scontrol show node n2`" in reason and rank == 0


@pytest.fixture
def local_slurm():
    """slurm/local with 2 nodes for this test (up.sh keeps a healthy one of this shape), taken down after."""
    res = subprocess.run(
        [str(SLURM_UP), "--nodes", "2", "--cpus", str(LOCAL_SLURM_CPUS)], capture_output=True, text=True, timeout=900
    )
    if res.returncode == 3:  # apt-get could not install Slurm, or munge would not start
        require(False, f"real-Slurm tests: up.sh could not provide Slurm: {res.stderr.strip().splitlines()[-1:]}")
    assert res.returncode == 0, f"up.sh failed:\n{res.stdout}\n{res.stderr}"
    try:
        yield
    finally:
        subprocess.run([str(SLURM_DOWN)], capture_output=True, text=True, timeout=120)


def _salloc_sweep(*args) -> list[str]:
    return ["salloc", "-N2", "--ntasks-per-node=1", "--time=10", sys.executable, "-m", "harness.cli.main", *args]


def _cold_sweep(tmp_path: Path, name: str, cold: bool = True) -> tuple[Path, list[str]]:
    """A 3-cell two-node sweep of cold ranks under srun (every cell a step of its own; warm with `cold=False`:
    one step of zygotes for the sweep): its file and argv."""
    sweep_file = _sweep_file(tmp_path, name, ["ddp", "bsp-a2a", "wfbp-a2a"], iters=300)
    body = yaml.safe_load(sweep_file.read_text())
    body.pop("testbed")
    sweep_file.write_text(yaml.safe_dump({**body, "backends": ["torch"], "device": "cpu"}))
    out = tmp_path / f"{name}-run"
    argv = ["sweep", str(sweep_file), "--output", str(out), "--launcher", "srun", "--no-progress"]
    return out, argv + (["--cold"] if cold else [])


def _during_first_step(argv: list[str], fault) -> tuple[subprocess.Popen, str, str]:
    """Run `argv` in a two-node allocation; call `fault()` 8 s into its first step; wait for it to end."""
    sweep = subprocess.Popen(
        _salloc_sweep(*argv),
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 120
        while not subprocess.run(["squeue", "-s", "-h"], capture_output=True, text=True).stdout.strip():
            assert sweep.poll() is None, sweep.communicate()
            assert time.monotonic() < deadline, "no step started within 120 s"
            time.sleep(0.5)
        time.sleep(8)  # the first cell's ranks are past their start
        fault()
        stdout, stderr = sweep.communicate(timeout=6 * CUT_TIMEOUT_S)
    finally:
        if sweep.poll() is None:
            os.killpg(sweep.pid, signal.SIGKILL)
    return sweep, stdout, stderr


@pytest.mark.root
@pytest.mark.slow
def test_a_node_drained_during_a_cold_sweep_lets_the_allocation_finish(local_slurm, tmp_path):
    """A drain stops new jobs on the node, not the steps of the allocation that holds it: the sweep completes
    and the node stays drained until resumed."""
    out, argv = _cold_sweep(tmp_path, "drained")
    drain = ["scontrol", "update", "nodename=n2", "state=drain", "reason=ddlbench-fault-test"]
    sweep, stdout, stderr = _during_first_step(argv, lambda: subprocess.run(drain, check=True))
    try:
        assert sweep.returncode == 0, (stdout, stderr)
        summary = pd.read_parquet(out / "summary.parquet")
        assert len(summary) == 3 and (summary["status"] == "ok").all(), summary[["cell_id", "reason"]]
        node = subprocess.run(["sinfo", "-h", "-n", "n2", "-o", "%T"], capture_output=True, text=True).stdout
        assert node.strip() == "drained", node
        assert not _left_behind(str(out)), _left_behind(str(out))
    finally:
        subprocess.run(["scontrol", "update", "nodename=n2", "state=resume"], check=False)


@pytest.mark.root
@pytest.mark.slow
def test_a_nodes_slurmd_killed_during_a_cold_sweep_fails_the_next_cells_naming_it(local_slurm, tmp_path):
    """Cold ranks: every cell is a step of its own, so the cells after n2's slurmd is killed cannot start there
    (the running one goes on under its slurmstepd). Warm ranks are one step for the whole sweep (the zygotes),
    which a lost slurmd does not end."""
    out, argv = _cold_sweep(tmp_path, "lost")
    slurmd = int(Path(SLURMD_PID.format(node="n2")).read_text())
    sweep, stdout, stderr = _during_first_step(argv, lambda: os.kill(slurmd, signal.SIGKILL))
    assert sweep.returncode == 1, (stdout, stderr)
    summary = pd.read_parquet(out / "summary.parquet")
    for r in summary.itertuples():
        print(f"\n{r.cell_id}: {r.status}, wall {r.wall_s:.1f} s: {r.reason}")
    assert len(summary) == 3
    ran, lost = summary[summary["status"] == "ok"], summary[summary["status"] == "failed"]
    assert len(ran) == 1 and len(lost) == 2, summary[["cell_id", "reason"]]
    assert lost["reason"].str.startswith("the workers step could not start on node n2").all(), lost["reason"].tolist()
    assert not _left_behind(str(out)), _left_behind(str(out))  # no rank; Slurm's own slurmstepd of n2's last
    # step may wait for the slurmd that was killed: the cluster's restart below ends it

    local = subprocess.run([str(SLURM_UP), "--nodes", "2", "--cpus", str(LOCAL_SLURM_CPUS)], capture_output=True)
    assert local.returncode == 0, local.stderr  # n2 back: up.sh finds the cluster unhealthy and starts it again
    again = subprocess.run(
        _salloc_sweep(*argv, "--resume", "--retry-failed"),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert again.returncode == 0, (again.stdout, again.stderr)
    after = pd.read_parquet(out / "summary.parquet")
    assert len(after) == 3 and (after["status"] == "ok").all(), after[["cell_id", "reason"]]
    kept = after.set_index("cell_id").loc[ran["cell_id"], "iter_s_median"].tolist()
    assert kept == ran["iter_s_median"].tolist(), "the measured cell was measured again"
    assert not _left_behind(str(out)), _left_behind(str(out))
    deadline = time.monotonic() + 60  # the allocation's own slurmstepd end a moment after salloc returns
    while subprocess.run(["pgrep", "-f", "slurmstepd"], capture_output=True).returncode == 0:
        assert time.monotonic() < deadline, "a slurmstepd outlived its allocation by 60 s"
        time.sleep(0.5)


@pytest.mark.root
@pytest.mark.slow
def test_a_nodes_slurmd_killed_during_a_warm_sweep_does_not_stop_it(local_slurm, tmp_path):
    """Warm ranks: the sweep's zygotes are one step started before its first cell, and every cell's ranks are
    forked from them, so a slurmd lost after they started ends nothing: every cell completes."""
    out, argv = _cold_sweep(tmp_path, "warm-lost", cold=False)
    slurmd = int(Path(SLURMD_PID.format(node="n2")).read_text())
    sweep, stdout, stderr = _during_first_step(argv, lambda: os.kill(slurmd, signal.SIGKILL))
    assert sweep.returncode == 0, (stdout, stderr)
    summary = pd.read_parquet(out / "summary.parquet")
    assert len(summary) == 3 and (summary["status"] == "ok").all(), summary[["cell_id", "reason"]]
    assert not _left_behind(str(out)), _left_behind(str(out))
