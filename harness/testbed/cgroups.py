"""A processor share of its own for every emulated host: one CPU control group per host (CFS bandwidth
control, and optionally cores of its own through cpuset), as Mininet's CPU-limited hosts keep an emulation
faithful as it grows (docs/ARCHITECTURE.md, "Testbed").

    ddlbench testbed up --hosts 2 --rate 200mbit --host-cpus 0.5     # each host: 50 ms of CPU per 100 ms
    ddlbench testbed up --hosts 2 --rate 200mbit --host-cores 1      # each host: a core of its own

Layout: cgroup v1 (this machine: /sys/fs/cgroup/cpu, /sys/fs/cgroup/cpuset) puts host i in
`<root>/cpu/ddlbench-<prefix>/h<i>` (cpu.cfs_quota_us = share x cpu.cfs_period_us) and, with cores, in
`<root>/cpuset/ddlbench-<prefix>/h<i>`; cgroup v2 (`<root>/cgroup.controllers` lists cpu) in
`<root>/ddlbench-<prefix>/h<i>` (cpu.max "quota period", cpuset.cpus). Every process the testbed starts on
a host joins its groups before it execs (procs/cgjoin.py; a warm rank right after its fork,
harness/warm/child.py), so its ranks, parameter servers and helpers share the host's processors, and
nothing else is in them. `throttling` reads the groups' cpu.stat (periods throttled, time throttled), which
the launcher records per cell. Where the kernel offers no CPU controller (`detect` is None), the testbed
says so in one line and runs without a share.

The root is CGROUP_ROOT_VAR when set (the tests point it at an empty folder: no controller), else
/sys/fs/cgroup.
"""

from __future__ import annotations

import contextlib
import math
import os
from dataclasses import dataclass
from pathlib import Path

from harness.core.errors import UserError

CGROUP_ROOT_VAR = "DDLBENCH_CGROUP_ROOT"
"""Where the control groups are mounted, when not /sys/fs/cgroup."""
DEFAULT_ROOT = "/sys/fs/cgroup"
PERIOD_US = 10_000
"""CFS bandwidth period: a share s gets s x 10 ms of CPU time per 10 ms of wall time. Short, so that a host's
processor is slower rather than stop-and-go: with 100 ms (the kernel's default) a 0.4 share runs 40 ms then stalls
60 ms, longer than a small workload's whole iteration, whose time then depends on where in the period it began."""
MIN_SHARE = 0.1
"""The kernel's smallest quota is 1 ms per period (cpu.cfs_quota_us >= 1000)."""
_V1_CPU_DIRS = ("cpu", "cpu,cpuacct", "cpuacct,cpu")


@dataclass(frozen=True)
class Layout:
    """Where this machine's CPU controllers are."""

    version: str
    """v1 | v2."""
    cpu: str
    """The cpu controller's hierarchy (v1: <root>/cpu; v2: <root>)."""
    cpuset: str | None
    """The cpuset controller's hierarchy (v1: <root>/cpuset; v2: <root>), None without one."""


def root() -> str:
    return os.environ.get(CGROUP_ROOT_VAR) or DEFAULT_ROOT


def detect(base: str | None = None) -> Layout | None:
    """The CPU controllers under `base` (default `root()`): cgroup v2 when its root lists `cpu`, else v1's
    cpu hierarchy; None when there is no CPU controller."""
    b = Path(base or root())
    with contextlib.suppress(OSError):
        words = (b / "cgroup.controllers").read_text().split()
        if "cpu" in words:
            return Layout("v2", str(b), str(b) if "cpuset" in words else None)
    for name in _V1_CPU_DIRS:
        if (b / name / "cpu.cfs_quota_us").exists():
            cpuset = b / "cpuset"
            return Layout("v1", str(b / name), str(cpuset) if (cpuset / "cpuset.cpus").exists() else None)
    return None


def machine_cores() -> int:
    """Cores this process may run on (what the host groups share)."""
    return len(os.sched_getaffinity(0))


def parse_share(value, hosts: int, cores: int | None = None) -> float | None:
    """A host's CPU share (cores' worth of CPU time, e.g. 0.5), checked: a positive number, at least
    MIN_SHARE, and `hosts` x share within the machine's cores. None stays None. Pure but for the core count."""
    if value is None:
        return None
    cores = cores or machine_cores()
    try:
        share = float(value) if not isinstance(value, bool) else math.nan
    except (TypeError, ValueError):
        share = math.nan
    if not math.isfinite(share) or share <= 0:
        raise UserError(f"host CPU share {value!r} is not a positive number of cores; give e.g. --host-cpus 0.5")
    if share < MIN_SHARE:
        raise UserError(f"host CPU share {value!r} is below the kernel's smallest, {MIN_SHARE:g} of a core")
    if hosts * share > cores + 1e-9:
        raise UserError(
            f"{hosts} hosts x {share:g} CPU = {hosts * share:g} cores, more than this machine's {cores}: "
            f"give at most {cores / hosts:g} per host"
        )
    return share


def parse_cores(value, hosts: int, share: float | None, cores: int | None = None) -> int | None:
    """Cores of its own per host (host i gets cores i*n..i*n+n-1), checked: a positive integer, `hosts` x n
    within the machine's cores, and a share no larger than them. None stays None."""
    if value is None:
        return None
    cores = cores or machine_cores()
    try:
        n = int(value) if not isinstance(value, bool) and float(value) == int(float(value)) else 0
    except (TypeError, ValueError):
        n = 0
    if n < 1:
        raise UserError(f"host cores {value!r} is not a positive whole number; give e.g. --host-cores 1")
    if hosts * n > cores:
        raise UserError(
            f"{hosts} hosts x {n} core(s) of their own = {hosts * n}, more than this machine's {cores}: "
            f"give fewer hosts or cores"
        )
    if share is not None and share > n:
        raise UserError(f"host CPU share {share:g} is more than the host's {n} core(s) of its own")
    return n


def host_dirs(layout: Layout, prefix: str, index: int, cores: bool) -> tuple[str, ...]:
    """The control groups of host `index`: its cpu group, and its cpuset group when it has cores of its own
    (the same directory on v2). Pure."""
    dirs = [f"{layout.cpu}/ddlbench-{prefix}/h{index}"]
    if cores and layout.cpuset is not None and layout.version == "v1":
        dirs.append(f"{layout.cpuset}/ddlbench-{prefix}/h{index}")
    return tuple(dirs)


def procs_files(dirs: tuple[str, ...] | list[str]) -> tuple[str, ...]:
    return tuple(f"{d}/cgroup.procs" for d in dirs)


def _write(path: str, value: str) -> None:
    with open(path, "w") as f:
        f.write(value)


def _read(path: str) -> str:
    with open(path) as f:
        return f.read().strip()


def build(layout: Layout, prefix: str, host_cpus: float | None, host_cores: int | None, hosts: int) -> None:
    """Create every host's groups with its share and cores (OSError when the kernel refuses)."""
    for base in {layout.cpu, layout.cpuset if host_cores else None} - {None}:
        top = f"{base}/ddlbench-{prefix}"
        os.makedirs(top, exist_ok=True)
        if layout.version == "v2":
            wanted = ["+cpu"] + (["+cpuset"] if host_cores and layout.cpuset else [])
            for d in (base, top):
                for w in wanted:
                    _write(f"{d}/cgroup.subtree_control", w)
        elif base == layout.cpuset:  # a v1 cpuset group starts empty: it may use what its parent may
            _write(f"{top}/cpuset.cpus", _read(f"{base}/cpuset.cpus"))
            _write(f"{top}/cpuset.mems", _read(f"{base}/cpuset.mems"))
    for i in range(hosts):
        dirs = host_dirs(layout, prefix, i, bool(host_cores))
        for d in dirs:
            os.makedirs(d, exist_ok=True)
        cpu = dirs[0]
        quota = str(round(host_cpus * PERIOD_US)) if host_cpus else None
        if layout.version == "v1":
            _write(f"{cpu}/cpu.cfs_period_us", str(PERIOD_US))
            _write(f"{cpu}/cpu.cfs_quota_us", quota or "-1")
        else:
            _write(f"{cpu}/cpu.max", f"{quota or 'max'} {PERIOD_US}")
        if host_cores and layout.cpuset is not None:
            where = dirs[-1]
            parent = os.path.dirname(where)
            _write(f"{where}/cpuset.cpus", f"{i * host_cores}-{(i + 1) * host_cores - 1}")
            _write(f"{where}/cpuset.mems", _read(f"{parent}/cpuset.mems") or "0")


def remove(prefixes: set[str] | list[str]) -> list[str]:
    """Remove the groups of every testbed prefix (processes left in them go back to the root group first);
    what it removed."""
    layout = detect()
    if layout is None:
        return []
    removed = []
    for base in {layout.cpu, layout.cpuset} - {None}:
        for p in sorted(prefixes):
            top = Path(base) / f"ddlbench-{p}"
            if not top.is_dir():
                continue
            for d in [*sorted(x for x in top.iterdir() if x.is_dir()), top]:
                _evacuate(d, Path(base))
                with contextlib.suppress(OSError):
                    d.rmdir()
                    removed.append(f"cgroup {d}")
    return removed


def _evacuate(group: Path, base: Path) -> None:
    with contextlib.suppress(OSError):
        for pid in (group / "cgroup.procs").read_text().split():
            with contextlib.suppress(OSError):
                _write(str(base / "cgroup.procs"), pid)


def exists(dirs: tuple[str, ...]) -> bool:
    return all(os.path.isdir(d) for d in dirs)


def throttling(cpu_dir: str) -> tuple[int, float] | None:
    """(periods throttled, seconds throttled) so far of the group at `cpu_dir`, from its cpu.stat (v1:
    throttled_time in ns; v2: throttled_usec); None when it cannot be read."""
    try:
        stat = dict(line.split() for line in Path(cpu_dir, "cpu.stat").read_text().splitlines() if line.strip())
    except (OSError, ValueError):
        return None
    if "throttled_usec" in stat:
        seconds = int(stat["throttled_usec"]) / 1e6
    else:
        seconds = int(stat.get("throttled_time", 0)) / 1e9
    return int(stat.get("nr_throttled", 0)), seconds
