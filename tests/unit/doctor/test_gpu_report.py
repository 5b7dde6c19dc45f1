"""scripts/gpu_report.sh (harness/doctor/timing/gpu_report.py) as its user meets it: a budget that reports what no
longer fits as `NOT RUN: no time left`, a check running past it stopped and killed, a run killed from outside that
leaves every verdict it reached, and an OUT that holds exactly summary.md, summary.json and details.tar.gz.
The checks here are small processes standing in for doctor and pytest (the real ones need a GPU or minutes);
the runner, the summary and the packing are the real ones."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

import pytest

from harness.doctor.timing import gpu_report
from harness.doctor.timing.budget import Budget
from harness.doctor.timing.summary import FILES, Summary
from helpers import ROOT

DRIVER = """
import sys
from harness.doctor.timing import gpu_report as R
py = sys.executable
R.checks = lambda device: [
    {"check": "quick", "part": "correctness", "estimate_s": 1, "argv": [py, "-c", "print('fine')"]},
    {"check": "broken", "part": "correctness", "estimate_s": 1, "argv": [py, "-c", "raise SystemExit(3)"]},
    {"check": "slow", "part": "timing", "estimate_s": 1,
     "argv": [py, "-c", "import os, sys, time; open(sys.argv[1], 'w').write(str(os.getpid())); time.sleep(300)",
              sys.argv[1]]},
]
R.Report.timing = lambda self, argv: None
sys.exit(R.main(sys.argv[2:]))
"""


def rows(out: Path) -> dict:
    return {r["check"]: r for r in json.loads((out / "summary.json").read_text())["checks"]}


def start_driver(tmp_path: Path, out: Path) -> tuple[subprocess.Popen, Path]:
    pid_file = tmp_path / "slow.pid"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
        "TMPDIR": str(tmp_path),
    }  # a killed runner's work folder stays in the test's folder, not in /tmp
    proc = subprocess.Popen(
        [sys.executable, "-c", DRIVER, str(pid_file), str(out), "--device", "cpu", "--budget", "600"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    deadline = time.monotonic() + 120
    while not (pid_file.exists() and pid_file.read_text()):
        assert proc.poll() is None and time.monotonic() < deadline, proc.stdout.read().decode()
        time.sleep(0.2)
    return proc, pid_file


def gone(pid: int, within_s: float = 10) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.1)
    return False


def test_a_check_slower_than_the_time_left_is_not_run(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # the work folder inside the test's
    out = tmp_path / "out"
    out.mkdir()
    rep = gpu_report.Report(out, 600, "cpu")
    rep.budget = Budget(time.time() + 40)  # 30 s left after the reserve
    marker = tmp_path / "ran"
    rep.summary.plan({}, [{"check": "slow", "part": "timing", "estimate_s": 95}])
    rep.step(
        {
            "check": "slow",
            "part": "timing",
            "estimate_s": 95,
            "argv": [sys.executable, "-c", f"open({str(marker)!r}, 'w')"],
        }
    )
    row = rows(out)["slow"]
    assert row["status"] == "NOT RUN" and row["verdict"] == "NOT RUN: no time left (needs about 95 s)"
    assert not marker.exists(), "a check that does not fit never starts"


def test_a_check_running_past_the_budget_is_stopped_and_killed(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # the work folder inside the test's
    out = tmp_path / "out"
    out.mkdir()
    rep = gpu_report.Report(out, 600, "cpu")
    rep.budget = Budget(time.time() + 13)  # 3 s left, and the check's estimate says it fits
    rep.summary.plan({}, [{"check": "overrun", "part": "timing", "estimate_s": 1}])
    t0 = time.monotonic()
    rep.step(
        {
            "check": "overrun",
            "part": "timing",
            "estimate_s": 1,
            "argv": [sys.executable, "-c", "import time; time.sleep(120)"],
        }
    )
    assert time.monotonic() - t0 < 15
    row = rows(out)["overrun"]
    assert (row["status"], row["verdict"]) == ("stopped", "stopped: the budget ran out")
    assert sorted(os.listdir(out)) == sorted(FILES)


def test_a_run_killed_from_outside_leaves_every_verdict_it_reached(tmp_path):
    out = tmp_path / "out"
    proc, pid_file = start_driver(tmp_path, out)
    proc.kill()  # SIGKILL: nothing of the runner runs after this
    proc.wait()
    got = rows(out)
    assert got["quick"]["status"] == "ok" and got["broken"]["status"] == "FAILED"
    assert got["broken"]["figure"] == "exit status 3"
    assert got["slow"]["status"] == "running"
    assert all(r["status"] == "pending" for name, r in got.items() if name.startswith("harness/bare"))
    md = (out / "summary.md").read_text()
    assert "| correctness | quick | ok |" in md and "**FAILED**" in md and "in progress" in md
    assert sorted(os.listdir(out)) == sorted(FILES), "OUT holds the three files only, even killed"
    assert gone(int(pid_file.read_text())), "the running check dies with the runner"


def test_sigterm_stops_the_run_and_finishes_its_summary(tmp_path):
    out = tmp_path / "out"
    proc, pid_file = start_driver(tmp_path, out)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 128 + signal.SIGTERM
    got = rows(out)
    assert got["slow"]["verdict"] == "stopped: interrupted (SIGTERM)"
    assert got["harness/bare resnet50-tiny fp32"]["verdict"] == "NOT RUN: interrupted (SIGTERM)"
    assert json.loads((out / "summary.json").read_text())["complete"] is True
    assert sorted(os.listdir(out)) == sorted(FILES)
    with tarfile.open(out / "details.tar.gz") as tar:
        assert {"details/quick.txt", "details/broken.txt", "details/versions.json"} <= set(tar.getnames())
    assert gone(int(pid_file.read_text()))


@pytest.mark.parametrize(
    "args, says",
    [
        (["--budget", "5"], "--budget 5 leaves no time to run anything"),
        (["--device", "cuda"], "no CUDA device here"),
    ],
)
def test_bad_input_is_one_line_and_exit_status_2(tmp_path, capsys, args, says):
    if "cuda" in args and __import__("torch").cuda.is_available():
        pytest.skip("this machine has a GPU: --device cuda is good input here")
    assert gpu_report.main([str(tmp_path / "out"), *args]) == 2
    err = capsys.readouterr().err.strip()
    assert says in err and len(err.splitlines()) == 1 and err.startswith("error: ")


def test_an_out_folder_that_is_not_empty_is_refused(tmp_path, capsys):
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "sweep").mkdir()
    assert gpu_report.main([str(tmp_path / "old"), "--device", "cpu"]) == 2
    err = capsys.readouterr().err
    assert "is not an empty folder" in err and "name a new folder" in err


def test_the_skeleton_lists_every_planned_check_pending_with_its_estimate(tmp_path):
    s = Summary(tmp_path)
    s.plan(
        {"title": "t", "budget_s": 420},
        [
            {"check": "doctor", "part": "correctness", "estimate_s": 45},
            {"check": "profile bert-large", "part": "timing", "estimate_s": 9},
        ],
    )
    md = (tmp_path / "summary.md").read_text()
    assert "| correctness | doctor | pending |" in md and "(45)" in md and "budget 420 s" in md
    s.update("doctor", status="running")
    s.update("doctor", status="ok", figure="exit status 0")
    row = rows(tmp_path)["doctor"]
    assert row["verdict"] == "ok" and row["seconds"] is not None and row["estimate_s"] == 45
