"""The launcher layer (issue 24): one registry of launchers, and the one supervisor every launcher hands
its processes to (procs/supervisor.py), with its rule for a cell's outcome."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from harness.contracts.launcher import LAUNCHERS, LaunchRequest
from harness.core.errors import UserError
from harness.experiment.sweep import sweep_from_dict
from harness.launchers.choose import ORDER, by_name, choose_launcher, load
from harness.procs import supervisor as w
from helpers import ROOT

FOLDERS = sorted(p.parent.name for p in (ROOT / "harness" / "launchers").glob("*/launcher.py"))
"""Every launcher's folder (harness/launchers/<name>/launcher.py), read from the tree, not listed here."""


def test_every_launcher_is_registered_once_and_chosen_by_name_only_when_it_can_be():
    assert (
        load() is LAUNCHERS and FOLDERS and sorted(LAUNCHERS) == sorted(ORDER) == FOLDERS
    )  # each folder registers its own name, asked
    assert by_name() == tuple(name for name in ORDER if LAUNCHERS.get(name).named)
    assert ORDER[-1] in by_name() and LAUNCHERS.get(ORDER[-1]).detect(LaunchRequest({}))  # the last takes any
    available = ", ".join(by_name())
    for name in [n for n in ORDER if n not in by_name()] + ["mpirun"]:
        with pytest.raises(UserError, match=f"unknown launcher '{name}'; available: {available}$"):
            choose_launcher(LaunchRequest({}), name)
    for name in ORDER:
        with pytest.raises(ValueError, match="registered twice"):
            LAUNCHERS.register(name, LAUNCHERS.get(name))


def test_the_testbed_is_chosen_by_name_as_every_launcher_and_refuses_a_sweeps_own_label():
    """`ddlbench run --testbed` and `ddlbench sweep FILE --launcher testbed` name the testbed's launcher in the
    registry, which runs on the testbed that is up as it is; a sweep file's own `network:` is refused there
    in one line, as under a file's `testbed:` (the rows' label is the testbed's emulated-<rate>)."""
    assert "testbed" in by_name()
    cfg = sweep_from_dict({"workloads": ["resnet50-tiny"], "network": "ipoib"})
    with pytest.raises(UserError, match=r"^`network: ipoib` labels loopback sweeps; on the testbed the label is"):
        choose_launcher(LaunchRequest({}, sweep=cfg), "testbed")


STARTED: list[subprocess.Popen] = []


@pytest.fixture(autouse=True)
def _kill_started():
    yield
    for p in STARTED:  # what a launcher's `finally` kills
        p.kill()
        p.wait()
    STARTED.clear()


def _proc(code: int, sleep_s: float = 0.0, main: bool = True, name: str = "rank 0") -> w.Proc:
    p = subprocess.Popen([sys.executable, "-c", f"import time, sys; time.sleep({sleep_s}); sys.exit({code})"])
    STARTED.append(p)
    return w.Proc(p, name, "rank0.log", lambda c: w.Ended(f"{name} died ({w.how(c)})", 0), main=main)


def _timed_out(running):
    return w.Ended("timed out", None)


def test_a_failure_before_the_result_fails_the_cell_after_it_is_a_warning(tmp_path):
    with pytest.raises(w.Ended, match="rank 0 died \\(exit code 3\\)"):
        w.watch([_proc(3)], 30, tmp_path, _timed_out)
    (tmp_path / "rank0.log").write_text("Traceback ...\nRuntimeError: Connection closed by peer\n")
    (tmp_path / "result.json").write_text(json.dumps({"ranks": []}))
    w.watch([_proc(0), _proc(3, name="rank 1")], 30, tmp_path, _timed_out)
    warnings = json.loads((tmp_path / "result.json").read_text())["warnings"]
    assert warnings == [
        {
            "warning": "rank 1 failed while shutting down (exit code 3) after result.json was written",
            "log": "RuntimeError: Connection closed by peer",
        }
    ]


def test_a_helper_ending_first_an_abort_and_a_hang_after_the_result(tmp_path, monkeypatch):
    with pytest.raises(w.Ended, match="servers"):
        w.watch([_proc(0, 5), _proc(0, main=False, name="servers")], 30, tmp_path, _timed_out)
    with pytest.raises(w.Ended, match="failed elsewhere"):
        w.watch([_proc(0, 5)], 30, tmp_path, _timed_out, abort=lambda: "failed elsewhere")
    with pytest.raises(w.Ended, match="timed out"):
        w.watch([_proc(0, 5)], 0.5, tmp_path, _timed_out)
    (tmp_path / "result.json").write_text("{}")
    monkeypatch.setattr(w, "SHUTDOWN_GRACE_S", 0.5)
    hung = _proc(0, 30, name="rank 2")
    w.watch([hung], 30, tmp_path, _timed_out)
    assert (
        "rank 2 still running 0.5 s after result.json"
        in json.loads((tmp_path / "result.json").read_text())["warnings"][0]["warning"]
    )
