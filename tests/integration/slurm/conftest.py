"""The two local Slurm clusters of this folder's modules: the plain one (slurm/local/up.sh, fixture `slurm`) and the
netns one for the modules that cross nodes (slurm/local/up-netns.sh, fixture `cluster`). Each is started by the
first module that uses it and stays up while the next modules of this folder use it too (their up script finds it
up and healthy in a fraction of a second): one start and one tear-down per folder, not per module."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from harness.testbed import netns as testbed
from helpers import LOCAL_SLURM_CPUS, NETNS_DOWN, NETNS_LAYOUT, NETNS_STATE, NETNS_UP, ROOT, require

HERE = Path(__file__).resolve().parent
UP, DOWN = ROOT / "slurm" / "local" / "up.sh", ROOT / "slurm" / "local" / "down.sh"


def _needed_next(request, fixture: str) -> bool:
    """Whether a later test of this folder uses `fixture` before any test outside it runs: then its cluster
    stays up for that test's module instead of a tear-down and a new start. A test outside the folder first
    takes it down (the testbed's tests need the lease the netns cluster holds)."""
    items = request.session.items
    mine = [i for i, item in enumerate(items) if getattr(item, "module", None) is request.module]
    for item in items[mine[-1] + 1 :] if mine else []:
        if HERE not in Path(item.path).resolve().parents:
            return False
        if fixture in item.fixturenames:
            return True
    return False


_left_up: set[str] = set()
"""The clusters a module left up for the next one (fixture names): the session's end takes them down."""


@pytest.fixture(scope="session")
def _down_at_the_end():
    """Whatever ended the session (an interrupt included), a cluster left up for a later module goes."""
    yield
    if "slurm" in _left_up:
        subprocess.run([str(DOWN)], capture_output=True, text=True, timeout=120)
    if "cluster" in _left_up and NETNS_STATE.exists():
        _down()
    _left_up.clear()


def _stays_up(request, fixture: str) -> bool:
    """After a module: whether its cluster stays up for the next module (`_needed_next`), noted for the end."""
    if _needed_next(request, fixture):
        _left_up.add(fixture)
        return True
    _left_up.discard(fixture)
    return False


@pytest.fixture(scope="module")
def slurm(request, _down_at_the_end):
    """slurm/local with 2 nodes of LOCAL_SLURM_CPUS CPUs for this module; torn down after it unless the next module
    of this folder uses it too."""
    if os.geteuid() != 0:
        require(False, "real-Slurm tests: not root (slurm/local/up.sh installs packages and starts daemons)")
    t0 = time.monotonic()
    res = subprocess.run(
        [str(UP), "--nodes", "2", "--cpus", str(LOCAL_SLURM_CPUS)], capture_output=True, text=True, timeout=900
    )
    print(res.stdout, res.stderr, f"up.sh took {time.monotonic() - t0:.1f} s", sep="\n")
    if res.returncode == 3:  # apt-get could not install Slurm, or munge would not start
        require(False, f"real-Slurm tests: up.sh could not provide Slurm: {res.stderr.strip().splitlines()[-1:]}")
    assert res.returncode == 0, f"up.sh failed:\n{res.stdout}\n{res.stderr}"
    yield
    if not _stays_up(request, "slurm"):
        subprocess.run([str(DOWN)], capture_output=True, text=True, timeout=120)


def _down() -> None:
    res = subprocess.run([str(NETNS_DOWN)], capture_output=True, text=True, timeout=120, check=False)
    assert res.returncode == 0, res.stderr
    assert not NETNS_STATE.exists()
    assert not [n for n in os.listdir("/run/netns") if n.startswith("dsl-")] if os.path.isdir("/run/netns") else True
    assert subprocess.run(["ip", "link", "show", "dsl-ctl"], capture_output=True, check=False).returncode != 0
    assert testbed.lease_holder() is None


@pytest.fixture(scope="module")
def cluster(request, _down_at_the_end):
    """The netns Slurm, 2 nodes, for this module; torn down after it, and checked to leave nothing, unless
    the next module of this folder uses it too (`_needed_next`: one start for the folder's modules)."""
    if os.geteuid() != 0:
        require(False, "netns Slurm tests: not root (up-netns.sh creates namespaces and starts daemons)")
    holder = testbed.lease_holder()
    if holder and "up-netns.sh" not in holder:
        pytest.fail(f"the emulated testbed is in use by {holder}: run these tests when it has finished")
    t0 = time.monotonic()
    res = subprocess.run([str(NETNS_UP), "--nodes", "2"], capture_output=True, text=True, timeout=900, check=False)
    print(res.stdout, res.stderr, f"up-netns.sh took {time.monotonic() - t0:.1f} s", sep="\n")
    if res.returncode == 3:  # apt-get could not install Slurm
        require(False, f"netns Slurm tests: up-netns.sh could not provide Slurm: {res.stderr.strip()[-300:]}")
    assert res.returncode == 0, f"up-netns.sh failed:\n{res.stdout}\n{res.stderr}"
    yield json.loads(NETNS_LAYOUT.read_text())
    if not _stays_up(request, "cluster"):
        _down()
