"""harness.networks.netif: routes from real `ip route get` output, counters from a sysfs tree, which interface won.

    python -m pytest tests/unit/networks/test_netif.py

The samples below were printed by iproute2 6.1 (Debian 12) on this machine and inside the nodes of
slurm/local/up-netns.sh (the IPoIB one is written by hand in the same shape); the last tests ask the real kernel of the
machine running them.
"""

from __future__ import annotations

import socket
import subprocess
from pathlib import Path

import pytest

from harness.core.errors import UserError
from harness.networks import netif
from harness.networks.netif import Route

# ---- `ip -o route get` samples -------------------------------------------------------------------
NODE1_TO_NODE2_FAST = "10.77.2.2 dev fast0 src 10.77.2.1 uid 0 \\    cache \n"
NODE1_TO_OWN_FAST = "local 10.77.2.1 dev lo src 10.77.2.1 uid 0 \\    cache <local> \n"
HOSTNAME_127_0_1_1 = "local 127.0.1.1 dev lo src 127.0.0.1 uid 0 \\    cache <local> \n"
VIA_GATEWAY = "10.255.255.1 via 192.0.2.1 dev eth0 src 192.0.2.2 uid 0 \\    cache \n"
IPV6_LOCAL = "local ::1 from :: dev lo table local proto kernel src ::1 metric 0 pref medium\n"
IPV6_VIA = "2001:db8::1 from :: via fd00::1 dev eth0 src fd00::2 metric 1024 pref medium\n"
MULTILINE = "local 127.0.1.1 dev lo src 127.0.0.1 uid 0 \n    cache <local> \n"  # without -o
IB_NODE = "10.10.0.7 dev ib0 src 10.10.0.3 uid 1000 \\    cache \n"  # written by hand: IPoIB on a cluster

ADDR_SHOW = (
    "1: lo    inet 127.0.0.1/8 scope host lo\\       valid_lft forever preferred_lft forever\n"
    "1: lo    inet6 ::1/128 scope host \\       valid_lft forever preferred_lft forever\n"
    "2: slow0    inet 10.77.1.1/24 scope global slow0\\       valid_lft forever preferred_lft forever\n"
    "3: fast0    inet 10.77.2.1/24 scope global fast0\\       valid_lft forever preferred_lft forever\n"
    "4: eth0    inet6 fe80::fc:ff:fe00:1/64 scope link \\       valid_lft forever preferred_lft forever\n"
)


@pytest.mark.parametrize(
    "text, want",
    [
        (NODE1_TO_NODE2_FAST, Route("10.77.2.2", "fast0", "10.77.2.1", None, False)),
        (NODE1_TO_OWN_FAST, Route("10.77.2.1", "lo", "10.77.2.1", None, True)),
        (HOSTNAME_127_0_1_1, Route("127.0.1.1", "lo", "127.0.0.1", None, True)),
        (VIA_GATEWAY, Route("10.255.255.1", "eth0", "192.0.2.2", "192.0.2.1", False)),
        (IPV6_LOCAL, Route("::1", "lo", "::1", None, True)),
        (IPV6_VIA, Route("2001:db8::1", "eth0", "fd00::2", "fd00::1", False)),
        (MULTILINE, Route("127.0.1.1", "lo", "127.0.0.1", None, True)),
        (IB_NODE, Route("10.10.0.7", "ib0", "10.10.0.3", None, False)),
    ],
)
def test_parse_route_get(text, want):
    assert netif.parse_route_get(text) == want


# (An unreachable destination is not printed: `ip` exits 2 with "RTNETLINK answers: Network is unreachable".)
@pytest.mark.parametrize("text", ["", "10.0.0.1 uid 0", "blackhole 10.0.0.1 uid 0"])
def test_parse_route_get_without_a_device_is_a_user_error(text):
    with pytest.raises(UserError) as e:
        netif.parse_route_get(text)
    assert "\n" not in str(e.value)


def test_parse_addr_show():
    assert netif.parse_addr_show(ADDR_SHOW) == [
        ("lo", "127.0.0.1"),
        ("lo", "::1"),
        ("slow0", "10.77.1.1"),
        ("fast0", "10.77.2.1"),
        ("eth0", "fe80::fc:ff:fe00:1"),
    ]


# ---- loopback refusal --------------------------------------------------------------------------
@pytest.mark.parametrize(
    "iface, addr", [("lo", "127.0.1.1"), ("lo", "10.77.2.1"), ("eth0", "127.0.0.1"), ("lo", "node1")]
)
def test_refuse_loopback_raises_one_line_what_why_fix(iface, addr):
    with pytest.raises(UserError) as e:
        netif.refuse_loopback(iface, addr)
    msg = str(e.value)
    assert "\n" not in msg and addr in msg and "loopback" in msg and "MASTER_ADDR" in msg
    assert "GLOO_SOCKET_IFNAME" in msg


@pytest.mark.parametrize("iface, addr", [("fast0", "10.77.2.1"), ("ib0", "10.10.0.7"), ("eth0", "node1")])
def test_refuse_loopback_accepts_real_interfaces(iface, addr):
    netif.refuse_loopback(iface, addr)


# ---- counters from a sysfs tree ----------------------------------------------------------------
def _fake_sysfs(root: Path, net: dict[str, tuple[int, int]], ib: dict[tuple[str, str], tuple[int, int]]) -> Path:
    for name, (rx, tx) in net.items():
        d = root / "class" / "net" / name / "statistics"
        d.mkdir(parents=True)
        (d / "rx_bytes").write_text(f"{rx}\n")
        (d / "tx_bytes").write_text(f"{tx}\n")
        (d / "rx_packets").write_text("1\n")
    for (hca, port), (rcv, xmit) in ib.items():
        d = root / "class" / "infiniband" / hca / "ports" / port / "counters"
        d.mkdir(parents=True)
        (d / "port_rcv_data").write_text(f"{rcv}\n")
        (d / "port_xmit_data").write_text(f"{xmit}\n")
    return root


def test_read_counters_net_and_infiniband_words(tmp_path):
    sysfs = _fake_sysfs(
        tmp_path,
        {"lo": (100, 100), "eth0": (5000, 7000), "ib0": (10, 20)},
        {("mlx5_0", "1"): (1000, 2000), ("mlx5_1", "1"): (0, 3)},
    )
    got = netif.read_counters(sysfs=str(sysfs), proc_net_dev=None)
    assert got == {
        "eth0": (5000, 7000),
        "ib0": (10, 20),
        "lo": (100, 100),
        "mlx5_0:1": (4000, 8000),
        "mlx5_1:1": (0, 12),
    }  # IB counts 4-byte words


def test_read_counters_without_infiniband_and_a_device_without_statistics(tmp_path):
    sysfs = _fake_sysfs(tmp_path, {"lo": (1, 2)}, {})
    (tmp_path / "class" / "net" / "bonding_masters").mkdir()  # a non-device entry, as in real sysfs
    assert netif.read_counters(sysfs=str(sysfs), proc_net_dev=None) == {"lo": (1, 2)}


def test_read_counters_named_and_missing(tmp_path):
    sysfs = _fake_sysfs(tmp_path, {"lo": (1, 2), "fast0": (3, 4), "slow0": (5, 6)}, {})
    assert netif.read_counters(["fast0"], sysfs=str(sysfs), proc_net_dev=None) == {"fast0": (3, 4)}
    with pytest.raises(UserError) as e:
        netif.read_counters(["ib0", "fast0"], sysfs=str(sysfs), proc_net_dev=None)
    msg = str(e.value)
    assert "ib0" in msg and "fast0, lo, slow0" in msg and "\n" not in msg


# /proc/net/dev of this machine (Debian 12, kernel 6.1), header as printed, counts shortened.
PROC_NET_DEV = (
    "Inter-|   Receive                                                |  Transmit\n"
    " face |bytes    packets errs drop fifo frame compressed "
    "multicast|bytes    packets errs drop fifo colls carrier compressed\n"
    "    lo: 4007080008  239034    0    0    0     0          0 "
    "        0 4007080008  239034    0    0    0     0       0          0\n"
    "  ifb0:       0       0    0    0    0     0          0 "
    "        0        0       0    0    0    0     0       0          0\n"
    "  eth0: 123456789   98765    0    0    0     0          0 "
    "        0  2345678   12345    0    0    0     0       0          0\n"
)


def test_parse_proc_net_dev():
    assert netif.parse_proc_net_dev(PROC_NET_DEV) == {
        "lo": (4007080008, 4007080008),
        "ifb0": (0, 0),
        "eth0": (123456789, 2345678),
    }


def test_read_counters_prefers_proc_when_sysfs_is_another_namespace(tmp_path):
    # Under `nsenter --net` alone, /sys still lists the root namespace's devices; /proc/net/dev the
    # caller's. Same names: sysfs is used; other names: /proc/net/dev (IB ports still from sysfs).
    sysfs = _fake_sysfs(tmp_path / "sys", {"lo": (1, 1), "eth0": (2, 2), "ifb0": (3, 3)}, {("mlx5_0", "1"): (1, 1)})
    proc = tmp_path / "dev"
    proc.write_text(PROC_NET_DEV)
    got = netif.read_counters(sysfs=str(sysfs), proc_net_dev=str(proc))
    assert got == {"eth0": (2, 2), "ifb0": (3, 3), "lo": (1, 1), "mlx5_0:1": (4, 4)}
    proc.write_text(PROC_NET_DEV.replace("eth0", "fast0"))
    got = netif.read_counters(sysfs=str(sysfs), proc_net_dev=str(proc))
    assert got == {"fast0": (123456789, 2345678), "ifb0": (0, 0), "lo": (4007080008, 4007080008), "mlx5_0:1": (4, 4)}


def test_counter_delta_and_main_interface(tmp_path):
    before = {"lo": (100, 100), "slow0": (1000, 1000), "fast0": (0, 0), "gone": (5, 5)}
    after = {"lo": (200, 200), "slow0": (3000, 1500), "fast0": (10_000_000, 50_000), "new": (9, 9)}
    delta = netif.counter_delta(before, after)
    assert delta == {"fast0": (10_000_000, 50_000), "lo": (100, 100), "slow0": (2000, 500)}
    assert netif.main_interface(delta) == "fast0"
    assert netif.main_interface({"lo": (10, 10), "fast0": (5, 5)}, ignore=("lo",)) == "fast0"


def test_counter_delta_after_a_reset_uses_the_new_count():
    assert netif.counter_delta({"ib0": (1000, 1000)}, {"ib0": (40, 2000)}) == {"ib0": (40, 1000)}


def test_main_interface_none_when_nothing_moved_and_ties_by_name():
    assert netif.main_interface({}) is None
    assert netif.main_interface({"a": (0, 0)}) is None
    assert netif.main_interface({"b": (5, 5), "a": (10, 0)}) == "a"


# ---- the real kernel of this machine -----------------------------------------------------------
def test_live_loopback_route_and_own_address():
    assert netif.iface_towards("127.0.0.1") == "lo"
    assert netif.route_towards("localhost").dev == "lo"
    with pytest.raises(UserError):
        netif.refuse_loopback(netif.iface_towards("127.0.0.1"), "127.0.0.1")
    out = subprocess.run(["ip", "-o", "-4", "addr", "show"], capture_output=True, text=True, check=True).stdout
    own = [(i, a) for i, a in netif.parse_addr_show(out) if i != "lo"]
    if own:  # the kernel says `local ... dev lo`; the interface that holds the address is the answer
        iface, addr = own[0]
        route = netif.route_towards(addr)
        assert (route.dev, route.local, route.src) == (iface, True, addr)


def test_live_unresolvable_and_invalid_addresses_are_user_errors():
    with pytest.raises(UserError) as e:
        netif.route_towards("no-such-host.invalid")
    assert "\n" not in str(e.value)


def test_live_counters_include_loopback_and_grow():
    before = netif.read_counters(["lo"])
    with (
        socket.create_server(("127.0.0.1", 0)) as srv,
        socket.create_connection(srv.getsockname()) as c,
        srv.accept()[0] as s,
    ):
        c.sendall(b"x" * 100_000)
        got = 0
        while got < 100_000:
            got += len(s.recv(65536))
    delta = netif.counter_delta(before, netif.read_counters(["lo"]))
    assert delta["lo"][0] >= 100_000 and netif.main_interface(delta) == "lo"
