"""Each testbed host's link as it is now, so that a cell can be told whether its links held (README, "Faults
tried"): both veth ends up or not, and the qdiscs on each end (kind and options, no counters).

    before = links.snapshot(state, ["ddlb-h0", "ddlb-h1"])
    links.down(before)                    # ["host ddlb-h1's link is down (ddlb-eth0 in ddlb-h1: DOWN; ...)"]
    links.changed(before, links.snapshot(state, ...))   # ["host ddlb-h1's link changed during the cell: ..."]
    watch = links.Watch(lambda: links.ports(state, ["ddlb-h0", "ddlb-h1"]))   # while the cell runs:
    watch()                               # None, or why the cell ends (a link stayed down); watch.flaps

A link cut (`ip link set ... down` on either end) or reshaped (`tc qdisc change ... tbf rate`, a child qdisc
that drops) during a cell is visible here and nowhere else: the ranks only see their messages stall, and a
number measured over a link whose shaping changed is not the method's.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from harness.testbed import netns
from harness.testbed.state import TestbedState

CMD_TIMEOUT_S = 10.0
"""Limit of one ip/tc call (they take milliseconds)."""

WATCH_EVERY_S = 1.0
"""How often `Watch` reads a running cell's links: one `ip` call each time (milliseconds of the driver's CPU),
and a link that goes down ends the cell within two reads."""


def _json(argv: list[str]) -> list:
    """netns.query_json, [] also where the command hangs or is missing: a link read never fails a cell itself."""
    try:
        return netns.query_json(argv, timeout_s=CMD_TIMEOUT_S)
    except (netns.CmdFailed, OSError):
        return []


def _option(key: str, value) -> str:
    """One qdisc option as tc's JSON gives it, a rate (bytes/s there) in Mbit/s as the testbed is given it."""
    if key == "rate" and isinstance(value, (int, float)):
        return f"rate={value * 8 / 1e6:g}mbit"
    return f"{key}={value}"


def _qdisc(q: dict) -> str:
    options = " ".join(_option(k, v) for k, v in sorted((q.get("options") or {}).items()))
    where = "root" if q.get("root") else f"parent {q.get('parent', '?')}"
    return f"{q.get('kind', '?')} ({where}{', ' + options if options else ''})"


def _ends(netns: str, shaping: bool = True) -> dict[str, dict]:
    """Every link of one namespace: {ifname: {"state": operstate, or DOWN when not administratively up,
    "qdiscs": [kind (where, options)], none read without `shaping`}}."""
    qdiscs: dict[str, list[str]] = {}
    for q in _json(["tc", "-n", netns, "-j", "qdisc", "show"]) if shaping else ():
        qdiscs.setdefault(q.get("dev", ""), []).append(_qdisc(q))
    out = {}
    for link in _json(["ip", "-n", netns, "-j", "link", "show"]):
        name = link.get("ifname", "")
        up = "UP" in (link.get("flags") or [])
        out[name] = {"state": link.get("operstate", "UNKNOWN") if up else "DOWN", "qdiscs": qdiscs.get(name, [])}
    return out


def snapshot(state: TestbedState, hosts=None) -> dict[str, dict]:
    """{host namespace: {"host": its end, "switch": the bridge's end}} for `hosts` (namespace names; default
    every host), each end {"name", "state", "qdiscs"}; an end that is gone reads state ABSENT."""
    switch = _ends(state.switch_netns)
    wanted = set(hosts) if hosts is not None else None
    out = {}
    for h in state.hosts:
        if wanted is not None and h.netns not in wanted:
            continue
        own = _ends(h.netns)
        out[h.netns] = {
            "host": {"name": f"{h.ifname} in {h.netns}", **own.get(h.ifname, {"state": "ABSENT", "qdiscs": []})},
            "switch": {
                "name": f"{h.bridge_port} in {state.switch_netns}",
                **switch.get(h.bridge_port, {"state": "ABSENT", "qdiscs": []}),
            },
        }
    return out


def ports(state: TestbedState, hosts=None) -> dict[str, dict]:
    """{host namespace: its link's switch end {"name", "state"}} for `hosts` (default every host), read in one
    `ip` call in the switch's namespace, so that `Watch` can read it every second. Either end of a veth pair
    set down takes the other's carrier with it, so this end says whether the link carries traffic. {} where
    the read failed (a namespace always has `lo`): unknown, not down."""
    switch = _ends(state.switch_netns, shaping=False)
    if not switch:
        return {}
    return {
        h.netns: {
            "name": f"{h.bridge_port} in {state.switch_netns}",
            "state": switch.get(h.bridge_port, {"state": "ABSENT"})["state"],
        }
        for h in state.hosts
        if hosts is None or h.netns in hosts
    }


def _ends_of(link: dict) -> list[dict]:
    return [link["host"], link["switch"]]


def down(snap: dict[str, dict]) -> list[str]:
    """One phrase per host whose link does not carry traffic (an end not UP)."""
    out = []
    for host, link in snap.items():
        if any(end["state"] != "UP" for end in _ends_of(link)):
            ends = "; ".join(f"{end['name']}: {end['state']}" for end in _ends_of(link))
            out.append(f"host {host}'s link is down ({ends})")
    return out


def changed(before: dict[str, dict], after: dict[str, dict]) -> list[str]:
    """One phrase per host whose link's state or shaping differs between two snapshots."""
    out = []
    for host in before:
        was, now = before[host], after.get(host)
        if now is None or was == now:
            continue
        what = []
        for a, b in zip(_ends_of(was), _ends_of(now)):
            if a["state"] != b["state"]:
                what.append(f"{a['name']} {a['state']} -> {b['state']}")
            if a["qdiscs"] != b["qdiscs"]:
                was_q, now_q = (", ".join(end["qdiscs"]) or "no qdisc" for end in (a, b))
                what.append(f"{a['name']} {was_q} -> {now_q}")
        out.append(f"host {host}'s link changed during the cell ({'; '.join(what)})")
    return out


class Watch:
    """A running cell's links, read every `every_s` by the supervisor's wait loop (its `abort`,
    procs/supervisor.py; docs/ARCHITECTURE.md, "Testbed"); `read` gives `ports`' answer.

    A host's link that reads down at two reads in a row ends the cell: nothing crosses it, and its ranks would
    otherwise wait in their collectives for the cell's whole timeout. One that reads down once and up at the
    next read (a flap) does not: the ranks' TCP connections outlive an outage that short (they retransmit),
    so the cell completes with a stall in its time, and `flaps` names it for the row, as a reshaped link is
    named. Two reads also keep one odd read from ending a healthy cell; a flap shorter than `every_s` may go
    unseen."""

    def __init__(self, read: Callable[[], dict[str, dict]], every_s: float = WATCH_EVERY_S, clock=time.monotonic):
        self.read, self.every_s, self.clock = read, every_s, clock
        self.flaps: list[str] = []  # a phrase per time a host's link read down, then up at the next read
        self._next = float("-inf")
        self._down: dict[str, dict] = {}

    def __call__(self) -> str | None:
        """None, or why the cell ends; reads the links at most once per `every_s`."""
        now = self.clock()
        if now < self._next:
            return None
        self._next = now + self.every_s
        ends = self.read()
        if not ends:  # the read failed: nothing known, nothing changed
            return None
        down = {host: end for host, end in ends.items() if end["state"] != "UP"}
        for host, end in self._down.items():
            if host not in down:
                self.flaps.append(
                    f"host {host}'s link was down during the cell and up at the next read, {self.every_s:g} s "
                    f"later ({end['name']}: {end['state']}, then UP)"
                )
        stayed = [host for host in down if host in self._down]
        self._down = down
        if not stayed:
            return None
        return "; ".join(
            f"host {host}'s link went down during the cell ({down[host]['name']}: {down[host]['state']} at two "
            f"reads {self.every_s:g} s apart), so the cell was ended rather than left to wait for its timeout "
            "(bring the link up, then `--resume --retry-failed`)"
            for host in stayed
        )
