"""What an emulated testbed is: names, addresses, link shaping, and its JSON state file.

Pure (no processes): `plan(...)` turns (hosts, rate, prefix) into a `TestbedState`; `load`/`save` read and
write the state file that `status` and launchers in other processes read. A launcher needs, per host,
`host.netns_path` (for `nsenter --net=...`), `host.addr` (MASTER_ADDR, DMLC_PS_ROOT_URI, ...) and
`host.ifname` (GLOO_SOCKET_IFNAME / NCCL_SOCKET_IFNAME); `TestbedState.nsenter(i)` is the argv prefix.

Layout (why a dedicated switch namespace: the root namespace is never touched, so the host's own routes,
firewall and other developers' loopback daemons cannot see or disturb the testbed, and deleting the
switch namespace deletes the bridge and every port at once, even after a crash):

    netns <prefix>-h0 : lo, <prefix>-eth0 10.77.0.1/24  --veth--  <prefix>-p0 --+
    netns <prefix>-h1 : lo, <prefix>-eth0 10.77.0.2/24  --veth--  <prefix>-p1 --+-- <prefix>-br0 (netns <prefix>-sw)
    ...
Every veth end carries a tbf qdisc at the configured rate: the host end shapes what the host sends, the
switch end shapes what it receives, so each direction of each link is limited independently (full duplex).
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import asdict, dataclass

from harness.core.atomic import write_text_atomic
from harness.core.errors import UserError
from harness.procs.cgjoin import join_prefix
from harness.testbed.cgroups import Layout, host_dirs, procs_files

STATE_PATH = "/run/ddlbench-testbed.json"
"""Where the state of the (single) testbed on this machine lives; /run is cleared on reboot, as are netns."""
LOCK_PATH = "/run/ddlbench-testbed.lock"
"""flock()ed while `up`/`down` change the system, so two processes cannot interleave them."""
LEASE_PATH = "/run/ddlbench-testbed.lease"
"""flock()ed (and naming its holder) for as long as one ddlbench process uses the testbed: a sweep, a
`run --testbed`, a `commbench --testbed`. The testbed is one per machine; a second user is refused."""
SCHEMA_VERSION = 1

SUBNET_PREFIX = "10.77.0"
"""A /24 that exists only inside the testbed's namespaces: the root namespace has no route to it."""
TBF_BURST = "1mb"
"""tbf bucket size (tc reads `mb` as megabytes). 1 MB >= rate/HZ up to ~2 Gbit/s at HZ=250, which
keeps tbf from throttling below its rate; measured on this machine kind (docs/ARCHITECTURE.md, "Testbed")."""
TBF_LATENCY_MS = 50
"""Longest a packet may wait in the tbf queue; sets the queue length (rate * latency)."""
MIN_HOSTS, MAX_HOSTS = 2, 16
_PREFIX_RE = re.compile(r"^[a-z][a-z0-9]{0,7}$")  # keeps "<prefix>-eth0" within IFNAMSIZ (15 chars)


@dataclass(frozen=True)
class Host:
    """One emulated host: a network namespace with one shaped link to the switch."""

    index: int
    """0-based host number; host 0 is the natural rendezvous (MASTER_ADDR)."""
    netns: str
    """Namespace name as `ip netns list` shows it, e.g. ddlb-h0."""
    netns_path: str
    """Bind-mount of the namespace, the argument of `nsenter --net=`."""
    ifname: str
    """The host's interface inside its namespace: set GLOO_SOCKET_IFNAME / NCCL_SOCKET_IFNAME to it."""
    addr: str
    """IPv4 address of `ifname` (no prefix length)."""
    bridge_port: str
    """The other veth end, a port of the bridge in the switch namespace."""
    cgroups: tuple[str, ...] = ()
    """The host's control groups (its cpu group first, then its cpuset group on cgroup v1 with cores of its
    own), every process started on it joins them (harness/testbed/cgroups.py); () without a share."""


@dataclass(frozen=True)
class TestbedState:
    """A testbed as built by `harness.testbed.netns.up`; persisted as JSON at STATE_PATH."""

    __test__ = False  # not a pytest test class despite its name

    prefix: str
    """Name prefix of every namespace and link (default ddlb)."""
    rate_mbit: float
    """tbf rate of every link in each direction, Mbit/s (10^6 bit/s, as tc's `mbit`)."""
    hosts: tuple[Host, ...]
    """The emulated hosts, in index order."""
    switch_netns: str
    """Namespace holding the bridge."""
    bridge: str
    """Bridge joining all hosts' links."""
    subnet: str = f"{SUBNET_PREFIX}.0/24"
    """Address range of the hosts; it exists only inside the testbed's namespaces."""
    tbf_burst: str = TBF_BURST
    """tbf burst as given to tc."""
    tbf_latency_ms: float = TBF_LATENCY_MS
    """tbf latency as given to tc, ms."""
    forced: bool = False
    """True if the rate exceeded the meaningful limit and `force=True` was given."""
    host_cpus: float | None = None
    """CPU share of every host, in cores' worth of CPU time (CFS quota / period); None: no share."""
    host_cores: int | None = None
    """Cores of its own per host (cpuset: host i on cores i*n..i*n+n-1); None: every core."""
    cgroup_version: str = ""
    """v1 | v2: the control groups holding the hosts' shares; "" without them."""
    created_unix: float = 0.0
    """When `up` built it, seconds since the epoch."""
    created_at: str = ""
    """The same instant, ISO 8601 UTC."""
    schema_version: int = SCHEMA_VERSION
    """Version of this JSON layout."""

    def nsenter(self, host_index: int) -> list[str]:
        """The argv prefix that runs what follows inside host `host_index`'s network namespace, and in its
        control groups when the hosts have a CPU share (procs/cgjoin.py)."""
        h = self.host(host_index)
        return ["nsenter", f"--net={h.netns_path}", "--", *join_prefix(procs_files(h.cgroups))]

    def host(self, host_index: int) -> Host:
        if not 0 <= host_index < len(self.hosts):
            raise UserError(
                f"host index {host_index} is outside the testbed: it has hosts 0..{len(self.hosts) - 1} "
                f"(bring up more with `ddlbench testbed up --hosts N`)"
            )
        return self.hosts[host_index]

    def same_config(self, other: TestbedState) -> bool:
        """True if `other` describes the same network (ignores when it was built)."""
        a, b = asdict(self), asdict(other)
        for k in ("created_unix", "created_at"):
            a.pop(k), b.pop(k)
        return a == b

    @property
    def netns_names(self) -> list[str]:
        return [h.netns for h in self.hosts] + [self.switch_netns]


def check_prefix(prefix: str) -> None:
    if not _PREFIX_RE.match(prefix):
        raise UserError(
            f"testbed prefix {prefix!r} is not allowed: interface names are limited to 15 characters; "
            f"use 1-8 lowercase letters/digits starting with a letter (default: ddlb)"
        )


def plan(
    hosts: int,
    rate_mbit: float,
    prefix: str = "ddlb",
    forced: bool = False,
    host_cpus: float | None = None,
    host_cores: int | None = None,
    layout: Layout | None = None,
) -> TestbedState:
    """The testbed that `up(hosts, rate_mbit, prefix)` builds; pure. A share or cores without `layout` (no
    CPU controller) are dropped."""
    now = time.time()
    if layout is None:
        host_cpus = host_cores = None
    limited = host_cpus is not None or host_cores is not None
    return TestbedState(
        prefix=prefix,
        rate_mbit=float(rate_mbit),
        hosts=tuple(
            Host(
                index=i,
                netns=f"{prefix}-h{i}",
                netns_path=f"/run/netns/{prefix}-h{i}",
                ifname=f"{prefix}-eth0",
                addr=f"{SUBNET_PREFIX}.{i + 1}",
                bridge_port=f"{prefix}-p{i}",
                cgroups=host_dirs(layout, prefix, i, bool(host_cores)) if limited else (),
            )
            for i in range(hosts)
        ),
        switch_netns=f"{prefix}-sw",
        bridge=f"{prefix}-br0",
        forced=forced,
        host_cpus=host_cpus,
        host_cores=host_cores,
        cgroup_version=layout.version if limited else "",
        created_unix=now,
        created_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now)),
    )


def owned_netns(name: str, prefix: str) -> bool:
    """True if namespace `name` is one a testbed with `prefix` creates (so `down` may delete it)."""
    return re.fullmatch(rf"{re.escape(prefix)}-(h\d+|sw)", name) is not None


def to_json(state: TestbedState) -> str:
    return json.dumps(asdict(state), indent=2, sort_keys=True)


def from_json(text: str) -> TestbedState:
    d = json.loads(text)
    if d.get("schema_version") != SCHEMA_VERSION:
        raise ValueError(f"testbed state schema {d.get('schema_version')} != {SCHEMA_VERSION}")
    d["hosts"] = tuple(Host(**{**h, "cgroups": tuple(h.get("cgroups", ()))}) for h in d["hosts"])
    return TestbedState(**d)


def load(path: str = STATE_PATH) -> TestbedState | None:
    """The persisted state, or None if there is none or it is unreadable (then `down` still sweeps)."""
    try:
        with open(path) as f:
            return from_json(f.read())
    except (OSError, ValueError, TypeError, KeyError):
        return None


def save(state: TestbedState, path: str = STATE_PATH) -> None:
    """Atomic write (write then rename), so a reader never sees half a file."""
    write_text_atomic(path, to_json(state) + "\n")
