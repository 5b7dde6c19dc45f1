"""Shared fixtures. Multi-process tests run real worker processes (gloo over loopback)."""

from __future__ import annotations

import os
import sys
import warnings
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def require(condition: bool, reason: str) -> None:
    """Skip loudly (a warning and the reason in the summary), or fail under CI (CI=true) where a required
    part must be present. Test modules use it as `from conftest import require`."""
    if condition:
        return
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"required for CI but missing: {reason}")
    warnings.warn(f"NOT RUN: {reason}")
    pytest.skip(f"NOT RUN: {reason}")


def rank_pids(under: Path, rank: int | None = None) -> list[int]:
    """Live rank processes of the cells under `under`: those whose output (fd 1) is a `rank<r>.log` there
    (`rank`: that one only). Warm or cold alike: a rank forked by the zygote has the zygote's command line
    and environment in /proc, so neither says which rank it is; its log does."""
    key, name = str(Path(under).resolve()), f"rank{rank}.log" if rank is not None else None
    pids = []
    for proc in Path("/proc").iterdir():
        try:
            if not proc.name.isdigit() or int(proc.name) == os.getpid():
                continue
            out = os.readlink(proc / "fd" / "1")
            if not out.startswith(key + os.sep) or not Path(out).name.startswith("rank") or \
                    (name and Path(out).name != name):
                continue
            if (proc / "stat").read_text().split(")")[-1].split()[0] != "Z":
                pids.append(int(proc.name))
        except (OSError, ValueError):
            continue
    return pids


@pytest.fixture
def run_dir(tmp_path) -> Path:
    return tmp_path / "run"


ROOT_REASON = ("needs root: the emulated testbed creates network namespaces and tc qdiscs, the local Slurm "
               "installs packages and starts daemons; run these tests as root")


@pytest.fixture(autouse=True)
def _root_or_loud_skip(request):
    """Tests marked `root`: skipped loudly when not root, a failure under CI (CI=true)."""
    if request.node.get_closest_marker("root") is None or os.geteuid() == 0:
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI=true but {ROOT_REASON}")
    print(f"\nSKIPPED (not root): {ROOT_REASON}", file=sys.stderr)
    pytest.skip(ROOT_REASON)


@pytest.fixture(scope="module")
def clean_machine():
    """Start from, and leave, a machine without any testbed (the testbed is one per machine)."""
    from harness.testbed import netns

    holder = netns.lease_holder() if os.geteuid() == 0 else None
    if holder:
        pytest.fail(f"the emulated testbed is in use by {holder}: these tests would reshape it under that run; "
                    f"run them when it has finished")
    if os.geteuid() == 0:
        netns.down()
    yield
    if os.geteuid() == 0:
        netns.down()
