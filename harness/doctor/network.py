"""The doctor's network facts: interfaces, and what the hostname resolves to.

The network facts of `ddlbench doctor`: interfaces (addresses, up/down, link speed) and what the
hostname resolves to, the classic multi-node failure (docs/ARCHITECTURE.md, "What listens where": gloo
takes the hostname's address unless GLOO_SOCKET_IFNAME names an interface, and Debian-style hosts map the
hostname to 127.0.1.1, so ranks on other nodes are told a loopback address).

    interfaces()        # [{"name": "eth0", "up": True, "addresses": ["10.0.0.5"], "speed_mbit": 10000}, ...]
    hostname_facts()    # {"hostname": "vm", "address": "127.0.0.1", "interface": "lo", "loopback": True, ...}

`hostname_verdict` is pure; the rest reads sysfs or runs `ip`, and answers None/[] where a tool is missing.
"""

from __future__ import annotations

import ipaddress
import os
import shutil
import socket
import subprocess

from harness.core.errors import UserError
from harness.networks.netif import LOOPBACK_IFACE, parse_addr_show, resolve, route_towards

SYS_NET = "/sys/class/net"
TOOL_TIMEOUT_S = 10.0
"""Longest wait for one `ip` call; it answers in milliseconds unless the system is wedged."""
IFF_UP = 0x1
"""The administrative up flag in /sys/class/net/<dev>/flags (linux/if.h)."""
IFNAME_VARS = ("GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME", "NCCL_IB_HCA", "TP_SOCKET_IFNAME")
"""Variables that name the network each library uses; shown when set because they override the choice."""
PROBE_ADDR = "1.1.1.1"
"""A public address off every local network: `ip route get` for it names the default route's interface
(asking sends no packet)."""


def run_tool(argv: list[str], timeout_s: float = TOOL_TIMEOUT_S) -> str | None:
    """stdout of a command, or None when the tool is missing, fails or hangs (doctor never stops on one)."""
    if shutil.which(argv[0]) is None:
        return None
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return p.stdout if p.returncode == 0 else None


def _read(path: str) -> str | None:
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:  # e.g. `speed` of a virtual device: EINVAL
        return None


def interfaces(sys_net: str = SYS_NET) -> list[dict]:
    """Every network interface of this namespace: name, administratively up, operational state, IPv4/IPv6
    addresses (`ip -o addr show`), link speed in Mbit/s when the driver reports one (virtual devices do
    not: None)."""
    try:
        names = sorted(os.listdir(sys_net))
    except OSError:
        names = sorted(name for _, name in socket.if_nameindex())
    addrs: dict[str, list[str]] = {}
    for name, addr in parse_addr_show(run_tool(["ip", "-o", "addr", "show"]) or ""):
        addrs.setdefault(name, []).append(addr)
    out = []
    for name in names:
        d = os.path.join(sys_net, name)
        if not os.path.isdir(d):
            continue  # e.g. bonding_masters
        flags, speed = _read(os.path.join(d, "flags")), _read(os.path.join(d, "speed"))
        out.append(
            {
                "name": name,
                "up": bool(int(flags, 16) & IFF_UP) if flags else None,
                "state": _read(os.path.join(d, "operstate")) or "unknown",
                "addresses": addrs.get(name, []),
                "speed_mbit": int(speed) if speed and speed.lstrip("-").isdigit() and int(speed) > 0 else None,
            }
        )
    return out


def hostname_verdict(hostname: str, address: str | None, interface: str | None, suggest: str | None = None) -> dict:
    """Whether the hostname's address is loopback, and what that means for multi-node runs. Pure.

    ("vm", "127.0.1.1", "lo") -> loopback True: gloo would tell other nodes a 127.x address;
    ("n1", "10.0.0.5", "eth0") -> loopback False."""
    if address is None:
        return {
            "hostname": hostname,
            "address": None,
            "interface": interface,
            "loopback": None,
            "verdict": f"{hostname} does not resolve: gloo cannot find its own address; add it to "
            f"/etc/hosts or DNS, or set GLOO_SOCKET_IFNAME",
        }
    try:
        loop = ipaddress.ip_address(address).is_loopback
    except ValueError:
        loop = False
    loop = loop or interface == LOOPBACK_IFACE
    if loop:
        fix = f"GLOO_SOCKET_IFNAME={suggest}" if suggest else "GLOO_SOCKET_IFNAME=<the interface of your network>"
        verdict = (
            f"loopback: fine on one box, but on a multi-node run gloo would tell other nodes {address}; "
            f"ddlbench sets the interface from the route to MASTER_ADDR, for other tools set {fix}"
        )
    else:
        verdict = f"not loopback: other nodes can reach {address}" + (f" via {interface}" if interface else "")
    return {"hostname": hostname, "address": address, "interface": interface, "loopback": loop, "verdict": verdict}


def _route_dev(addr: str) -> str | None:
    try:
        return route_towards(addr).dev
    except UserError:  # no `ip`, no route: a fact to show, not an error
        return None


def hostname_facts() -> dict:
    """What socket.gethostname() resolves to, the interface that address sits on (`ip route get`), the
    default route's interface (suggested when the hostname is loopback) and interface variables set."""
    host = socket.gethostname()
    try:
        address = resolve(host)
    except UserError:
        address = None
    default_dev = _route_dev(PROBE_ADDR)
    facts = hostname_verdict(
        host, address, _route_dev(address) if address else None, default_dev if default_dev != LOOPBACK_IFACE else None
    )
    facts["default_route_interface"] = default_dev
    facts["variables"] = {v: os.environ[v] for v in IFNAME_VARS if os.environ.get(v)}
    return facts
