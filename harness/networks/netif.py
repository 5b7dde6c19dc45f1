"""Which network interface a rank's traffic takes, and how many bytes each interface carried.

    route = route_towards("10.77.2.1")     # Route(dest='10.77.2.1', dev='fast0', src='10.77.2.2', ...)
    iface = iface_towards(master_addr)     # "fast0": what to give GLOO_SOCKET_IFNAME / NCCL_SOCKET_IFNAME
    refuse_loopback(iface, master_addr)    # multi-node: a rendezvous reached through `lo` is a mistake
    before = read_counters()               # {"fast0": (rx_bytes, tx_bytes), "mlx5_0:1": (...), ...}
    ...                                    # the traffic to account for
    delta = counter_delta(before, read_counters())
    main_interface(delta)                  # "fast0": the interface that carried most bytes

The parsers (`parse_route_get`, `parse_addr_show`, `parse_proc_net_dev`) are pure and tested on real
output; the functions around them run `ip` or read sysfs and procfs. Everything here answers for the
network namespace of the calling process (a real node, a node of slurm/local/up-netns.sh, or a testbed
host entered with `nsenter --net`).
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import shutil
import socket
import subprocess
from dataclasses import dataclass

from harness.core.errors import UserError

IP_TIMEOUT_S = 10.0
"""Limit of one `ip` call; it takes milliseconds, so hitting it means the system is wedged."""
IB_WORD_BYTES = 4
"""InfiniBand port_rcv_data/port_xmit_data count 4-byte words (IBA spec, PortCounters; the Linux
sysfs-class-infiniband ABI document says the same)."""
LOOPBACK_IFACE = "lo"
"""Linux's loopback device; a route through it never leaves the node."""

# `ip route get` prints a route type before the destination for anything but plain unicast.
_ROUTE_TYPES = {
    "local",
    "broadcast",
    "multicast",
    "unicast",
    "anycast",
    "unreachable",
    "blackhole",
    "prohibit",
    "throw",
    "nat",
}
# Keys followed by one value in `ip route get` output (iproute2 ip/iproute.c print_route).
_ROUTE_KEYS = {
    "dev",
    "src",
    "via",
    "from",
    "table",
    "uid",
    "proto",
    "metric",
    "pref",
    "mark",
    "iif",
    "oif",
    "tos",
    "realm",
    "realms",
    "expires",
    "mtu",
    "advmss",
    "hoplimit",
    "error",
    "scope",
    "encap",
    "nexthop",
    "nhid",
    "rtt",
    "rttvar",
    "cwnd",
    "initcwnd",
    "initrwnd",
    "window",
    "ssthresh",
    "reordering",
    "congctl",
    "features",
    "quickack",
    "fastopen_no_cookie",
}


@dataclass(frozen=True)
class Route:
    """What `ip route get DEST` says about one destination."""

    dest: str
    """The destination address asked about (an IP literal)."""
    dev: str
    """The device packets to `dest` leave through; `lo` for an address of this host."""
    src: str | None
    """The source address the kernel picks for `dest`: this rank's address on that network."""
    via: str | None
    """The gateway, when `dest` is not on a directly attached network."""
    local: bool
    """True when `dest` is an address of this host (route type `local`, device `lo`)."""


def parse_route_get(text: str) -> Route:
    """The route in one `ip [-o] route get ADDR` answer (one-line or multi-line form). Pure.

    "10.77.2.2 dev fast0 src 10.77.2.1 uid 0 \\    cache" -> Route('10.77.2.2', 'fast0', '10.77.2.1', None, False)
    "local 127.0.1.1 dev lo src 127.0.0.1 uid 0 \\    cache <local>" -> Route(..., 'lo', ..., local=True)"""
    tokens = text.replace("\\", " ").split()
    if not tokens:
        raise UserError(
            "`ip route get` printed nothing: cannot tell which interface leads to the address; "
            "check that iproute2 works here (`ip -o route get 127.0.0.1`)"
        )
    kind = tokens.pop(0) if tokens[0] in _ROUTE_TYPES else "unicast"
    dest = tokens.pop(0) if tokens else ""
    fields: dict[str, str] = {}
    i = 0
    while i < len(tokens):
        if tokens[i] in _ROUTE_KEYS and i + 1 < len(tokens):
            fields.setdefault(tokens[i], tokens[i + 1])
            i += 2
        else:
            i += 1  # flags such as `cache`, `<local>`, `onlink`
    if kind in ("unreachable", "blackhole", "prohibit", "throw") or "dev" not in fields:
        raise UserError(
            f"there is no usable route to {dest or '?'} ({kind}): ranks could not reach it; "
            f"check the address (MASTER_ADDR) and this node's networks (`ip route`)"
        )
    return Route(dest=dest, dev=fields["dev"], src=fields.get("src"), via=fields.get("via"), local=kind == "local")


def parse_addr_show(text: str) -> list[tuple[str, str]]:
    """(interface, address) pairs from `ip -o addr show` output, prefix length dropped. Pure.

    "3: fast0    inet 10.77.2.1/24 brd 10.77.2.255 scope global fast0\\ ..." -> [("fast0", "10.77.2.1")]"""
    pairs = []
    for line in text.splitlines():
        f = line.split()
        if len(f) >= 4 and f[2] in ("inet", "inet6"):
            pairs.append((f[1].split("@")[0], f[3].split("/")[0]))
    return pairs


def _ip(args: list[str]) -> str:
    if shutil.which("ip") is None:
        raise UserError(
            "`ip` is not installed: it tells which interface leads to the rendezvous address; "
            "install it with `apt-get install iproute2`"
        )
    try:
        p = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=IP_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        raise UserError(
            f"`ip {' '.join(args)}` did not answer within {IP_TIMEOUT_S:g} s: the network stack "
            f"of this node is wedged; check it with `ip route`"
        ) from None
    if p.returncode != 0:
        why = (p.stderr.strip() or p.stdout.strip() or f"exit status {p.returncode}").splitlines()[0]
        raise UserError(
            f"`ip {' '.join(args)}` failed ({why}): no route to that address from this node; "
            f"check the address (MASTER_ADDR) and this node's networks (`ip route`)"
        )
    return p.stdout


def resolve(addr: str) -> str:
    """`addr` as an IP literal: itself if it is one, else what the resolver gives first, which is what a
    library connecting to that name would use (so a hostname mapped to 127.0.1.1 stays 127.0.1.1)."""
    try:
        return str(ipaddress.ip_address(addr))
    except ValueError:
        pass
    try:
        return socket.getaddrinfo(addr, None, type=socket.SOCK_STREAM)[0][4][0]
    except (socket.gaierror, IndexError) as e:
        raise UserError(
            f"cannot resolve {addr!r} ({e}): ranks could not reach it; give an IP address or a "
            f"name this node resolves (`getent hosts {addr}`)"
        ) from None


def route_towards(addr: str) -> Route:
    """The route this process's kernel takes to `addr` (an IP or a hostname) per `ip -o route get`.

    For an address of this node (the rendezvous node asking about its own address) the kernel answers
    `local ... dev lo`; then `dev` is the interface that holds the address instead, so that every rank,
    the rendezvous one included, names the same network. It stays `lo` for a loopback address."""
    ip = resolve(addr)
    route = parse_route_get(_ip(["-o", "route", "get", ip]))
    if route.local and not ipaddress.ip_address(ip).is_loopback:
        owners = [i for i, a in parse_addr_show(_ip(["-o", "addr", "show"])) if a == ip]
        if owners:
            return Route(dest=ip, dev=owners[0], src=ip, via=None, local=True)
    return route


def iface_towards(addr: str) -> str:
    """The interface traffic to `addr` leaves through: the value for GLOO_SOCKET_IFNAME and friends."""
    return route_towards(addr).dev


def refuse_loopback(iface: str, addr: str) -> None:
    """Raise UserError when a multi-node rendezvous `addr` is reached through the loopback device
    `iface`: the other nodes would be told to connect to this node's 127.x address."""
    loop_addr = False
    with contextlib.suppress(ValueError):
        loop_addr = ipaddress.ip_address(addr).is_loopback
    if iface == LOOPBACK_IFACE or loop_addr:
        raise UserError(
            f"the rendezvous address {addr} is reached through the loopback device ({iface}) on a multi-node "
            f"run, so ranks on other nodes would be told a 127.x address (Debian maps the hostname to "
            f"127.0.1.1); set MASTER_ADDR to this node's address on the network under test, or name that "
            f"network's interface (e.g. GLOO_SOCKET_IFNAME=eth0) in the network profile"
        )


def _read_int(path: str) -> int:
    with open(path) as f:
        return int(f.read().split()[0])


def parse_proc_net_dev(text: str) -> dict[str, tuple[int, int]]:
    """{name: (rx_bytes, tx_bytes)} from /proc/net/dev (two header lines, then `name: rx_bytes rx_packets
    ... (8 receive fields) tx_bytes ...`). Pure."""
    out = {}
    for line in text.splitlines()[2:]:
        name, sep, rest = line.partition(":")
        f = rest.split()
        if sep and len(f) >= 9:
            out[name.strip()] = (int(f[0]), int(f[8]))
    return out


def read_counters(
    ifaces: list[str] | None = None, sysfs: str = "/sys", proc_net_dev: str | None = "/proc/net/dev"
) -> dict[str, tuple[int, int]]:
    """Bytes received and sent so far, per interface: {name: (rx_bytes, tx_bytes)}.

    Network devices from <sysfs>/class/net/*/statistics; InfiniBand ports, when present, from
    <sysfs>/class/infiniband/<hca>/ports/<port>/counters/port_{rcv,xmit}_data (4-byte words, converted to
    bytes) under the name "<hca>:<port>" (NCCL_IB_HCA's spelling; ':' is not allowed in a netdev name).
    RDMA traffic shows only in the port counters; IPoIB traffic also in the ib* device.

    A sysfs shows the devices of the network namespace that mounted it, not the reader's: a process
    started with `nsenter --net` alone (the testbed's ranks) would read another namespace's devices.
    /proc/net/dev always follows the reader, so when its device names differ from sysfs's, its counts
    are used instead (the same kernel counters). `ifaces` limits the answer to those names; one that
    does not exist is a UserError naming the ones that do."""
    out: dict[str, tuple[int, int]] = {}
    net = os.path.join(sysfs, "class", "net")
    for name in sorted(os.listdir(net)) if os.path.isdir(net) else []:
        stats = os.path.join(net, name, "statistics")
        try:
            out[name] = (_read_int(os.path.join(stats, "rx_bytes")), _read_int(os.path.join(stats, "tx_bytes")))
        except (OSError, ValueError, IndexError):
            continue  # not a device (bonding_masters), or one that vanished while being read
    if proc_net_dev is not None and os.path.exists(proc_net_dev):
        with open(proc_net_dev) as f:
            own = parse_proc_net_dev(f.read())
        if set(own) != set(out):
            out = dict(sorted(own.items()))
    ib = os.path.join(sysfs, "class", "infiniband")
    for hca in sorted(os.listdir(ib)) if os.path.isdir(ib) else []:
        ports = os.path.join(ib, hca, "ports")
        for port in sorted(os.listdir(ports)) if os.path.isdir(ports) else []:
            c = os.path.join(ports, port, "counters")
            try:
                rx = _read_int(os.path.join(c, "port_rcv_data")) * IB_WORD_BYTES
                tx = _read_int(os.path.join(c, "port_xmit_data")) * IB_WORD_BYTES
            except (OSError, ValueError, IndexError):
                continue
            out[f"{hca}:{port}"] = (rx, tx)
    if ifaces is None:
        return out
    missing = [i for i in ifaces if i not in out]
    if missing:
        raise UserError(
            f"network interface {', '.join(missing)} does not exist on this node "
            f"({socket.gethostname()}); it has {', '.join(out) or 'none'}: fix the interface "
            f"name in the network profile"
        )
    return {i: out[i] for i in ifaces}


def counter_delta(before: dict[str, tuple[int, int]], after: dict[str, tuple[int, int]]) -> dict[str, tuple[int, int]]:
    """Bytes (rx, tx) each interface carried between two `read_counters` snapshots. Pure.

    Interfaces in only one snapshot are left out. A counter that went down was reset (device recreated,
    driver reload): its `after` value is then the best lower bound."""
    delta = {}
    for name in sorted(before.keys() & after.keys()):
        (rx0, tx0), (rx1, tx1) = before[name], after[name]
        delta[name] = (rx1 - rx0 if rx1 >= rx0 else rx1, tx1 - tx0 if tx1 >= tx0 else tx1)
    return delta


def main_interface(delta: dict[str, tuple[int, int]], ignore: tuple[str, ...] = ()) -> str | None:
    """The interface that carried most bytes (rx + tx) in a `counter_delta`; None if none carried any.
    Ties go to the name first in sort order. `ignore` leaves names out (e.g. ("lo",)). Pure."""
    totals = {n: rx + tx for n, (rx, tx) in delta.items() if n not in ignore}
    best = max(sorted(totals), key=lambda n: totals[n], default=None)
    return best if best is not None and totals[best] > 0 else None
