"""Named network profiles: which interface and transport every library uses for a cell (docs/ARCHITECTURE.md,
"Networks"). A cell's `network` names a profile; every launcher applies the profile's variables to
every rank, and the rank checks that the interface exists before joining the group.

    eth:      {iface: eth0}                        # sockets on the Ethernet interface
    ipoib:    {iface: ib0, nccl_ib: false}         # NCCL over sockets on the IPoIB interface
    ib-rdma:  {iface: ib0, nccl_ib: true, nccl_ib_hca: mlx5_0}   # NCCL over verbs; gloo over IPoIB

Built-in profiles: `loopback` (one box) and the three above with their usual interface names. A site
defines its own in a YAML file (`DDLBENCH_NETWORKS`, else ~/.config/ddlbench/networks.yaml), mapping a
name to these fields; a sweep file may also define profiles under `networks:`. A cell's network is resolved
once (`resolve_network`, from cell.resolve) into the variables the cell carries (`CellSpec.network_env`).
A name that is no profile is refused unless it is declared as a label (a sweep file's `labels:`, the
emulated testbed's emulated-<rate>): a label sets no variables, so the route to the rendezvous address
applies (harness/backends/interfaces.py). A misspelt profile never becomes a label silently.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, fields
from pathlib import Path

import yaml

from harness.core.errors import UserError

SITE_FILE_VAR = "DDLBENCH_NETWORKS"
"""Variable naming a site's profile file."""
DEFAULT_SITE_FILE = Path.home() / ".config" / "ddlbench" / "networks.yaml"


@dataclass(frozen=True)
class NetworkProfile:
    name: str
    """Profile name, written in the rows' `network` column."""
    iface: str | None = None
    """The interface every socket transport uses (gloo, NCCL's sockets and bootstrap, Horovod's gloo,
    the parameter servers); None = the route to the rendezvous address."""
    nccl_ib: bool | None = None
    """True: NCCL over InfiniBand verbs (RDMA); False: NCCL over sockets (NCCL_IB_DISABLE=1); None: NCCL's
    own choice."""
    nccl_ib_hca: str | None = None
    """NCCL_IB_HCA: which HCAs (and ports) NCCL's verbs use, e.g. mlx5_0:1."""
    nccl_net: str | None = None
    """NCCL_NET: force NCCL's network plugin ("IB" or "Socket")."""
    rate_gbit_s: float | None = None
    """The link's nominal rate, recorded with the rows (Gbit/s)."""
    description: str = ""
    """One line for `ddlbench list`."""

    def env(self) -> dict[str, str]:
        """The variables every rank gets for this profile."""
        out: dict[str, str] = {}
        if self.iface:
            out.update(
                GLOO_SOCKET_IFNAME=self.iface,
                NCCL_SOCKET_IFNAME=self.iface,
                TP_SOCKET_IFNAME=self.iface,
                HOROVOD_GLOO_IFACE=self.iface,
            )
        if self.nccl_ib is not None:
            out["NCCL_IB_DISABLE"] = "0" if self.nccl_ib else "1"
        if self.nccl_ib_hca:
            out["NCCL_IB_HCA"] = self.nccl_ib_hca
        if self.nccl_net:
            out["NCCL_NET"] = self.nccl_net
        return out


BUILTIN = {
    p.name: p
    for p in (
        NetworkProfile(
            "loopback",
            iface="lo",
            description="one box: every library on the loopback device "
            "(across nodes: the route to the rendezvous, as auto)",
        ),
        NetworkProfile("auto", description="each rank takes the interface of its route to the rendezvous address"),
        NetworkProfile("eth", iface="eth0", nccl_ib=False, description="TCP on the Ethernet interface eth0"),
        NetworkProfile(
            "ipoib", iface="ib0", nccl_ib=False, description="TCP over InfiniBand (IPoIB, ib0); NCCL on sockets"
        ),
        NetworkProfile(
            "ib-rdma",
            iface="ib0",
            nccl_ib=True,
            description="NCCL over InfiniBand verbs (RDMA); gloo and bootstrap over IPoIB (ib0)",
        ),
    )
}
_KEYS = {f.name for f in fields(NetworkProfile)} - {"name"}
LOOPBACK_NAMES = ("loopback", "auto")
"""Labels that name no network of a cluster: one box's loopback, or "take the route" (`auto`)."""


def profile_from_dict(name: str, data, source: str) -> NetworkProfile:
    """One profile from its YAML mapping; unknown keys and bad values are a UserError naming the source."""
    if not re.fullmatch(r"[A-Za-z0-9_.+-]+", str(name)):
        raise UserError(f"network profile name {name!r} in {source} is not usable; use letters, digits and _.+-")
    if not isinstance(data, dict):
        raise UserError(f"network profile {name!r} in {source} must be a mapping such as {{iface: eth0}}")
    unknown = sorted(set(data) - _KEYS - {"rate"})
    if unknown:
        raise UserError(
            f"unknown key(s) {', '.join(unknown)} in network profile {name!r} of {source}: known "
            f"keys are {', '.join(sorted(_KEYS))}"
        )
    iface = data.get("iface")
    if iface is not None and not re.fullmatch(r"[A-Za-z0-9_.:@-]{1,15}", str(iface)):
        raise UserError(
            f"iface {iface!r} of network profile {name!r} ({source}) is not an interface name "
            f"(at most 15 letters, digits, _.:-@; gloo takes one concrete name)"
        )
    clean = {k: v for k, v in data.items() if k in _KEYS}
    return NetworkProfile(name=str(name), **clean)


def site_profiles(path: str | Path | None = None) -> dict[str, NetworkProfile]:
    """The site's profiles (DDLBENCH_NETWORKS, else ~/.config/ddlbench/networks.yaml); {} when none."""
    p = Path(path or os.environ.get(SITE_FILE_VAR) or DEFAULT_SITE_FILE)
    if not p.exists():
        if path or os.environ.get(SITE_FILE_VAR):
            raise UserError(f"network profile file {p} does not exist; fix {SITE_FILE_VAR} or create it")
        return {}
    try:
        data = yaml.safe_load(p.read_text()) or {}
    except yaml.YAMLError:
        raise UserError(f"network profile file {p} is not valid YAML; fix its syntax") from None
    if not isinstance(data, dict):
        raise UserError(f"network profile file {p} must map profile names to {{iface: ...}}")
    return {str(n): profile_from_dict(n, d, str(p)) for n, d in data.items()}


def profiles(extra: dict | None = None) -> dict[str, NetworkProfile]:
    """Built-in, then the site's, then `extra` (a sweep file's `networks:`), later ones winning."""
    out = dict(BUILTIN)
    out.update(site_profiles())
    out.update({str(n): profile_from_dict(n, d, "the sweep file") for n, d in (extra or {}).items()})
    return out


def resolve_network(name: str, networks: dict | None = None, labels: tuple = ()) -> NetworkProfile:
    """The profile a cell's `network` names (cell.resolve calls this once; launchers apply the result and
    never look it up again): a profile (built-in, the site's, or `networks`, a sweep file's `networks:`),
    or a label declared as one (`labels`: a sweep file's `labels:`, the testbed's emulated-<rate>), which
    sets no variables. Anything else is a misspelt profile: a UserError listing the known names."""
    known = profiles(networks)
    if name in known:
        return known[name]
    if name in labels:
        return NetworkProfile(name, description="a label: no interface named, the route to the rendezvous")
    where = os.environ.get(SITE_FILE_VAR) or DEFAULT_SITE_FILE
    raise UserError(
        f"unknown network {name!r}: known profiles are {', '.join(sorted(known))}; fix --network "
        f"or `network:`, define the profile in {where} ({SITE_FILE_VAR}), or declare a free label "
        f"under `labels:` in the sweep file"
    )


def rate_label(rate_mbit: float) -> str:
    """The rows' `network` of an emulated network shaped to `rate_mbit` (the testbed's links, and what advise
    and the validations name it): emulated-500mbit, emulated-1gbit, emulated-2.5gbit. A label, not a profile
    (it sets no variables: `resolve_network` takes it when declared). Pure."""
    if rate_mbit >= 1000:
        return f"emulated-{rate_mbit / 1000:g}gbit"
    return f"emulated-{rate_mbit:g}mbit"


def profile_vars(name: str, env: dict, nodes: int) -> dict[str, str]:
    """The variables of a resolved profile (`env`, NetworkProfile.env()) for ranks spanning `nodes` hosts:
    none for `loopback`/`auto` across hosts, where every rank takes the route to the rendezvous address
    instead (harness/backends/interfaces.py) and records it. Pure."""
    return {} if name in LOOPBACK_NAMES and nodes > 1 else dict(env)
