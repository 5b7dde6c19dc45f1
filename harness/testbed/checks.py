"""What a testbed request may ask for, checked before the system is touched: link rates (parsed the way
tc writes them), host counts, root and the tools (docs/ARCHITECTURE.md, "Testbed")."""

from __future__ import annotations

import os
import re
import shutil

from harness.core.errors import UserError
from harness.testbed import state as st

MAX_MEANINGFUL_RATE_MBIT = 2000.0
"""Above ~2 Gbit/s the 2 cores of this machine, not the emulated link, limit a gloo all-reduce
(measured: busbw tracks the tbf rate within a few percent up to ~2 Gbit/s; docs/ARCHITECTURE.md, "Testbed")."""
MIN_RATE_MBIT = 1.0
"""Below this gloo's default timeouts trip on ordinary message sizes."""

_TOOLS = {"ip": "iproute2", "tc": "iproute2", "nsenter": "util-linux"}
_RATE_RE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:e[+-]?[0-9]+)?)\s*([a-z]*)(?:/s)?\s*$")
_RATE_UNITS_MBIT = {"": 1.0, "bit": 1e-6, "kbit": 1e-3, "mbit": 1.0, "gbit": 1e3, "tbit": 1e6}


def parse_rate(rate: str | float | int) -> float:
    """A link rate in Mbit/s (10^6 bit/s). Numbers are Mbit/s; strings take tc's bit units:
    "500mbit" -> 500.0, "1gbit" -> 1000.0, "2.5Gbit/s" -> 2500.0, "800" -> 800.0. Pure."""
    if isinstance(rate, bool):
        raise UserError(f"rate {rate!r} is not a rate: give e.g. 500mbit, 1gbit, or a number of Mbit/s")
    if isinstance(rate, (int, float)):
        value = float(rate)
    else:
        m = _RATE_RE.match(str(rate).lower())
        unit = m.group(2) if m else None
        if unit in ("bps", "kbps", "mbps", "gbps", "tbps"):
            raise UserError(
                f"rate {rate!r} is ambiguous: tc reads '{unit}' as bytes per second, people mean bits; "
                f"write {m.group(1)}{unit[:-3]}bit for bits (or multiply by 8)"
            )
        if not m or unit not in _RATE_UNITS_MBIT:
            raise UserError(
                f"cannot read rate {rate!r}: write a number with a unit (bit, kbit, mbit, gbit, tbit), "
                f"e.g. 500mbit or 1gbit; a bare number means Mbit/s"
            )
        value = float(m.group(1)) * _RATE_UNITS_MBIT[unit]
    if not value >= MIN_RATE_MBIT or value == float("inf"):
        raise UserError(
            f"rate {rate!r} is below {MIN_RATE_MBIT:g} Mbit/s (or not finite): gloo would time out on "
            f"ordinary messages; give at least 1mbit"
        )
    return value


def check_request(hosts: int, rate_mbit: float, force: bool = False) -> None:
    """Refuse what would be impossible or meaningless, before touching the system. Pure."""
    if not st.MIN_HOSTS <= hosts <= st.MAX_HOSTS:
        raise UserError(
            f"--hosts {hosts} is out of range: a testbed has {st.MIN_HOSTS}..{st.MAX_HOSTS} hosts "
            f"(fewer is no network, more oversubscribes the 2 cores); pick a count in that range"
        )
    if rate_mbit > MAX_MEANINGFUL_RATE_MBIT and not force:
        raise UserError(
            f"rate {rate_mbit:g} Mbit/s is above {MAX_MEANINGFUL_RATE_MBIT:g} Mbit/s: beyond ~2 Gbit/s the "
            f"2 CPU cores, not the emulated link, limit gloo, so the emulation would be meaningless; "
            f"use a lower rate, or pass --force (force=True) to shape at it anyway"
        )


def check_system() -> None:
    """Refuse when the testbed cannot be built here: not root, or a tool missing."""
    if os.geteuid() != 0:
        raise UserError(
            "the testbed needs root: creating network namespaces and qdiscs requires CAP_NET_ADMIN "
            "and CAP_SYS_ADMIN; run as root (e.g. sudo ddlbench testbed up ...)"
        )
    for tool, package in _TOOLS.items():
        if shutil.which(tool) is None:
            raise UserError(
                f"`{tool}` is not installed: the testbed drives the kernel with it; "
                f"install it with `apt-get install {package}`"
            )
