"""The netns Slurm cluster for the modules of this folder that cross nodes (slurm/local/up-netns.sh)."""

from __future__ import annotations

import json
import os
import subprocess
import time

import pytest
from helpers import NETNS_DOWN, NETNS_LAYOUT, NETNS_STATE, NETNS_UP, require

from harness.testbed import netns as testbed


@pytest.fixture(scope="module")
def cluster():
    """The netns Slurm, 2 nodes, for this module; torn down at the end, and checked to leave nothing."""
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
    res = subprocess.run([str(NETNS_DOWN)], capture_output=True, text=True, timeout=120, check=False)
    assert res.returncode == 0, res.stderr
    assert not NETNS_STATE.exists()
    assert not [n for n in os.listdir("/run/netns") if n.startswith("dsl-")] if os.path.isdir("/run/netns") else True
    assert subprocess.run(["ip", "link", "show", "dsl-ctl"], capture_output=True, check=False).returncode != 0
    assert testbed.lease_holder() is None
