"""Each testbed host's link as it is now, so that a cell can be told whether its links held (README, "Faults
tried"): both veth ends up or not, and the qdiscs on each end (kind and options, no counters).

    before = links.snapshot(state, ["ddlb-h0", "ddlb-h1"])
    links.down(before)                    # ["host ddlb-h1's link is down (ddlb-eth0 in ddlb-h1: DOWN; ...)"]
    links.changed(before, links.snapshot(state, ...))   # ["host ddlb-h1's link changed during the cell: ..."]

A link cut (`ip link set ... down` on either end) or reshaped (`tc qdisc change ... tbf rate`, a child qdisc
that drops) during a cell is visible here and nowhere else: the ranks only see their messages stall, and a
number measured over a link whose shaping changed is not the method's.
"""

from __future__ import annotations

from harness.testbed import netns
from harness.testbed.state import TestbedState

CMD_TIMEOUT_S = 10.0
"""Limit of one ip/tc call (they take milliseconds)."""


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


def _ends(netns: str) -> dict[str, dict]:
    """Every link of one namespace: {ifname: {"state": operstate, or DOWN when not administratively up,
    "qdiscs": [kind (where, options)]}}."""
    qdiscs: dict[str, list[str]] = {}
    for q in _json(["tc", "-n", netns, "-j", "qdisc", "show"]):
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
