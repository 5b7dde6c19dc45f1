"""Shared fixtures (shared functions: tests/helpers.py). Multi-process tests run real worker processes (gloo over
loopback)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from harness import backends
from harness.warm.spawn import warm_ranks

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
backends.load()  # as every entry point does (docs/ARCHITECTURE.md, "Plugins"): tests ask the registry directly


SERIAL_FOLDERS = ("integration",)
"""Folders whose tests start multi-process runs (ranks, launchers, Slurm, the testbed, a browser)."""
SERIAL_MARKS = ("slow", "root", "gpu", "timing")
"""Marks of tests that start processes of their own, or need the machine to themselves."""
FIRST_FOLDER = "tests/unit/study"
"""Its tests fit the study's models (minutes each): collected first."""


def pytest_collection_modifyitems(config, items):
    """Mark `serial` every test that starts processes (under tests/integration, or marked slow, root, gpu or
    timing): scripts/test.sh runs the others two at a time (pytest-xdist, `-m "not serial"`) and then these one
    at a time (`-m serial`), so that no multi-process test shares the machine's two cores with another test
    (a rank starved of its core makes its cell's timings, and its timeouts, the neighbour's)."""
    for item in items:
        parts = Path(str(item.fspath)).resolve().relative_to(ROOT / "tests").parts
        if parts[0] in SERIAL_FOLDERS or any(item.get_closest_marker(m) for m in SERIAL_MARKS):
            item.add_marker(pytest.mark.serial)
    # the longest single tests first (stable: each module's tests stay together, in their order), so that two
    # workers share the rest instead of one waiting at the end while the other runs a three-minute fit
    items.sort(key=lambda item: not Path(str(item.fspath)).resolve().is_relative_to(ROOT / FIRST_FOLDER))


@pytest.fixture(scope="module", autouse=True)
def _warm_module(request):
    """Every cell a test module starts runs warm, forked from one pre-imported zygote for the module
    (docs/ARCHITECTURE.md, "Warm ranks"), as a user's run does: a rank's imports are paid once per module, not
    once per rank and cell. A run's own block nests in this one and shares its zygote; tests of cold starts
    ask for them (`warm_ranks(enabled=False)`, `cold: true`, `--cold`); a module that counts zygotes itself
    says `WARM_SESSION = False`."""
    with warm_ranks(getattr(request.module, "WARM_SESSION", True), here=False):  # started by the first rank
        yield


@pytest.fixture(autouse=True)
def _environment_restored(request):
    """A test leaves the process environment as it found it: whatever it changed in os.environ without
    monkeypatch (a shim run in-process, a library's setdefault) is put back and named, so that no later
    test runs under a variable it did not set (a leaked GLOO_SOCKET_IFNAME or PET_NNODES changes what the
    launchers decide)."""
    before = dict(os.environ)
    yield
    if dict(os.environ) != before:
        changed = sorted({k for k in set(before) | set(os.environ) if before.get(k) != os.environ.get(k)})
        os.environ.clear()
        os.environ.update(before)
        print(
            f"\n*** {request.node.nodeid} left the environment changed ({', '.join(changed)}): restored",
            file=sys.__stderr__,
        )


@pytest.fixture
def run_dir(tmp_path) -> Path:
    return tmp_path / "run"


ROOT_REASON = (
    "needs root: the emulated testbed creates network namespaces and tc qdiscs, the local Slurm "
    "installs packages and starts daemons; run these tests as root"
)


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
        pytest.fail(
            f"the emulated testbed is in use by {holder}: these tests would reshape it under that run; "
            f"run them when it has finished"
        )
    if os.geteuid() == 0:
        netns.down()
    yield
    if os.geteuid() == 0:
        netns.down()
