"""Bring an emulated multi-host network up and down: network namespaces, veth, a bridge, tbf shaping.

    ddlbench testbed up --hosts 4 --rate 1gbit     # or: netns.up(4, "1gbit")
    ddlbench testbed status
    nsenter --net=/run/netns/ddlb-h1 -- python ...   # netns.host_command(1, ["python", ...])
    ddlbench testbed down

The layout and the state file are described in harness/testbed/state.py. Needs root and Debian's
iproute2 (ip, tc) and util-linux (nsenter). `netem` is absent from this kernel, so the testbed shapes
bandwidth only; it adds no delay or loss.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time

from harness.core.errors import UserError
from harness.testbed import cgroups
from harness.testbed import state as st
from harness.testbed.checks import (  # noqa: F401  (part of this module's interface)
    MAX_MEANINGFUL_RATE_MBIT,
    MIN_RATE_MBIT,
    check_request,
    check_system,
    parse_rate,
)
from harness.testbed.lease import _locked, lease, lease_holder  # noqa: F401  (part of this interface)
from harness.testbed.state import TestbedState

CMD_TIMEOUT_S = 30.0
"""Limit of one ip/tc call; they take milliseconds, so hitting it means the system is wedged."""
KILL_GRACE_S = 3.0
"""How long processes left in a namespace get between SIGTERM and SIGKILL on `down`."""


class CmdFailed(Exception):
    pass


def _run(argv: list[str], check: bool = True, timeout_s: float = CMD_TIMEOUT_S) -> str:
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        raise CmdFailed(f"`{' '.join(argv)}` did not finish within {timeout_s:g} s") from None
    if check and p.returncode != 0:
        why = (p.stderr.strip() or p.stdout.strip() or f"exit status {p.returncode}").splitlines()[0]
        raise CmdFailed(f"`{' '.join(argv)}` failed: {why}")  # first line only: errors are one line
    return p.stdout


def query_json(argv: list[str], timeout_s: float = CMD_TIMEOUT_S) -> list:
    """What an `ip -j` or `tc -j` query prints, parsed; [] where it prints nothing or no JSON. CmdFailed when it
    does not finish within `timeout_s`."""
    out = _run(argv, check=False, timeout_s=timeout_s).strip()
    try:
        return json.loads(out) if out else []
    except ValueError:
        return []


def _existing_netns() -> list[str]:
    return [d["name"] for d in query_json(["ip", "-j", "netns", "list"])]


def _build(s: TestbedState) -> None:
    rate = f"{round(s.rate_mbit * 1e6)}bit"
    tbf = ["root", "tbf", "rate", rate, "burst", s.tbf_burst, "latency", f"{s.tbf_latency_ms:g}ms"]
    sw = s.switch_netns
    _run(["ip", "netns", "add", sw])
    _run(["ip", "-n", sw, "link", "add", s.bridge, "type", "bridge"])
    _run(["ip", "-n", sw, "link", "set", s.bridge, "up"])
    for h in s.hosts:
        _run(["ip", "netns", "add", h.netns])
        _run(["ip", "-n", h.netns, "link", "set", "lo", "up"])
        # Both ends are created directly in their namespaces: nothing ever appears in the root namespace.
        _run(["ip", "-n", sw, "link", "add", h.bridge_port, "type", "veth", "peer", "name", h.ifname, "netns", h.netns])
        _run(["ip", "-n", sw, "link", "set", h.bridge_port, "master", s.bridge])
        _run(["ip", "-n", h.netns, "addr", "add", f"{h.addr}/24", "dev", h.ifname])
        _run(["tc", "-n", h.netns, "qdisc", "replace", "dev", h.ifname, *tbf])  # host -> switch
        _run(["tc", "-n", sw, "qdisc", "replace", "dev", h.bridge_port, *tbf])  # switch -> host
        _run(["ip", "-n", sw, "link", "set", h.bridge_port, "up"])
        _run(["ip", "-n", h.netns, "link", "set", h.ifname, "up"])


def _tbf_rate_bytes(netns: str, dev: str) -> int | None:
    for q in query_json(["tc", "-n", netns, "-j", "qdisc", "show", "dev", dev]):
        if q.get("kind") == "tbf" and q.get("root"):
            return q.get("options", {}).get("rate")
    return None


def _is_live(s: TestbedState) -> bool:
    """True if every namespace exists and every link end carries its tbf at the recorded rate."""
    if not set(s.netns_names) <= set(_existing_netns()):
        return False
    if not all(cgroups.exists(h.cgroups) for h in s.hosts):
        return False
    want = round(s.rate_mbit * 1e6 / 8)
    for h in s.hosts:
        addrs = [
            a.get("local")
            for d in query_json(["ip", "-n", h.netns, "-j", "addr", "show", "dev", h.ifname])
            for a in d.get("addr_info", [])
        ]
        if h.addr not in addrs:
            return False
        for ns, dev in ((h.netns, h.ifname), (s.switch_netns, h.bridge_port)):
            got = _tbf_rate_bytes(ns, dev)
            if got is None or abs(got - want) > max(1, want // 1000):  # tc rounds the rate
                return False
    return True


def up(
    hosts: int,
    rate_mbit: float | str,
    prefix: str = "ddlb",
    force: bool = False,
    host_cpus: float | str | None = None,
    host_cores: int | str | None = None,
) -> TestbedState:
    """Build the testbed (or keep it, if the same one is already up); return its state.

    `host_cpus`: every host's CPU share in cores (its own control group, harness/testbed/cgroups.py);
    `host_cores`: cores of its own per host. Without a CPU controller in the kernel, one line says so and
    the testbed is built without them. A different configuration already up is torn down first (processes
    inside it are killed). On any failure everything built so far is removed and a UserError says which
    step failed."""
    rate = parse_rate(rate_mbit)
    check_request(hosts, rate, force)
    share = cgroups.parse_share(host_cpus, hosts)
    cores = cgroups.parse_cores(host_cores, hosts, share)
    st.check_prefix(prefix)
    check_system()
    layout = cgroups.detect() if share is not None or cores is not None else None
    if (share is not None or cores is not None) and layout is None:
        _note_no_controller()
    want = st.plan(hosts, rate, prefix, rate > MAX_MEANINGFUL_RATE_MBIT, share, cores, layout)
    with _locked():
        have = st.load()
        if have is not None and have.same_config(want) and _is_live(have):
            return have
        _down_locked(prefix)
        try:
            _build(want)
            if want.cgroup_version:
                try:
                    cgroups.build(layout, prefix, want.host_cpus, want.host_cores, hosts)
                except OSError as e:
                    raise CmdFailed(f"creating the hosts' control groups under {layout.cpu}: {e}") from None
        except CmdFailed as e:
            _down_locked(prefix)
            raise UserError(
                f"testbed up failed and was rolled back: {e}; check that the kernel has veth, bridge and "
                f"sch_tbf (modprobe veth bridge sch_tbf) and that nothing else uses the {prefix}-* names"
            ) from None
        st.save(want)
    return want


_noted: list[str] = []


def _note_no_controller() -> None:
    """One line, once per process: the share is asked for and the kernel cannot give it."""
    if not _noted:
        _noted.append("no-cpu-controller")
        print(
            f"note: no CPU controller under {cgroups.root()} (cgroup v1 cpu or v2 cpu.max): the testbed "
            f"runs without a CPU share per host",
            file=sys.stderr,
            flush=True,
        )


def status() -> TestbedState | None:
    """The testbed that is up, or None (no state file, or its namespaces/shaping are gone)."""
    s = st.load()
    if s is None or shutil.which("ip") is None or shutil.which("tc") is None:
        return None
    if os.geteuid() != 0:  # `ip -n`/`tc -n` need root; the namespace list does not
        return s if set(s.netns_names) <= set(_existing_netns()) else None
    return s if _is_live(s) else None


def down(prefix: str | None = None) -> list[str]:
    """Remove the testbed: kill processes left in its namespaces, delete namespaces (which deletes
    their links and the bridge), stray root-namespace links and the state file. Returns what it removed;
    [] when nothing was up. Also cleans up after a crashed `up` or a lost state file."""
    check_system()
    with _locked():
        return _down_locked(prefix)


def _down_locked(prefix: str | None) -> list[str]:
    s = st.load()
    prefixes = {"ddlb"} | ({s.prefix} if s else set()) | ({prefix} if prefix else set())
    names = [n for n in _existing_netns() if any(st.owned_netns(n, p) for p in prefixes)]
    removed = _kill_inside(names)
    for n in names:
        _run(["ip", "netns", "del", n], check=False)
        removed.append(f"netns {n}")
    for link in query_json(["ip", "-j", "link", "show"]):
        name = link.get("ifname", "")
        if any(name.startswith(f"{p}-") for p in prefixes):
            _run(["ip", "link", "del", name], check=False)
            removed.append(f"link {name}")
    removed += cgroups.remove(prefixes)
    if os.path.exists(st.STATE_PATH):
        os.remove(st.STATE_PATH)
        removed.append(f"state {st.STATE_PATH}")
    return removed


def _pids_in(netns: str) -> list[int]:
    return [int(p) for p in _run(["ip", "netns", "pids", netns], check=False).split() if p.isdigit()]


def _kill_inside(names: list[str]) -> list[str]:
    """SIGTERM every process in the namespaces, SIGKILL what is left after KILL_GRACE_S."""
    pids = {p: n for n in names for p in _pids_in(n) if p != os.getpid()}
    removed = []
    for pid, n in pids.items():
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
            removed.append(f"process {pid} in {n}")
    deadline = time.monotonic() + KILL_GRACE_S
    while pids and time.monotonic() < deadline:
        time.sleep(0.05)
        pids = {p: n for p, n in pids.items() if _alive(p)}
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    return removed


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"  # a zombie is dead, just not reaped
    except (OSError, IndexError):
        return False


def _current(state: TestbedState | None) -> TestbedState:
    s = state or st.load()
    if s is None:
        raise UserError("no testbed is up: start one with `ddlbench testbed up --hosts 2 --rate 1gbit`")
    return s


def host_command(host_index: int, argv: list[str], state: TestbedState | None = None) -> list[str]:
    """argv that runs `argv` inside host `host_index`'s network namespace (nsenter --net=...).

    Only the network namespace changes: files, /sys and the environment stay the host's, so a
    launcher passes env (MASTER_ADDR=host_addr(0), GLOO_SOCKET_IFNAME=state.hosts[i].ifname) as usual."""
    return _current(state).nsenter(host_index) + list(argv)


def host_addr(i: int, state: TestbedState | None = None) -> str:
    """IPv4 address of host i inside the testbed."""
    return _current(state).host(i).addr
