"""Which network a cell's traffic really took (docs/ARCHITECTURE.md, "Networks"): every rank records the
interface it was told or chose (harness/backends/interfaces.py), one rank per node the bytes each of the
node's interfaces carried per iteration (harness/rank/worker.py); these pure functions turn that into summary
columns and a verdict.

A multi-node cell whose traffic did not go mainly through the interface its ranks named is flagged
(`net_check` = "wrong-interface"): e.g. a profile that means the IB network while the bytes crossed the
management Ethernet. One box's traffic stays on `lo` and is not checked.
"""

from __future__ import annotations

import json

MAIN_SHARE = 0.8
"""Share of a multi-node cell's bytes (all interfaces but loopback) the named interface must carry."""
LOOPBACK = "lo"


def network_columns(ranks: list[dict], nodes: int) -> dict:
    """Summary columns from the ranks' records: iface (named or chosen), net_main_iface (carried most),
    net_iface_share, net_bytes_per_iter (sent + received over every node, through the named interface),
    net_bytes_json (rank@host that read them -> interface -> [rx, tx] bytes per iteration), net_check."""
    named = sorted({r.get("iface") for r in ranks if r.get("iface")})
    per_host: dict[str, dict] = {}
    totals: dict[str, float] = {}
    for r in ranks:
        for name, (rx, tx) in (r.get("net_bytes_per_iter") or {}).items():
            # ranks of several emulated hosts may share a hostname: name the rank that read the counters
            per_host.setdefault(f"rank{r.get('rank')}@{r.get('host', '?')}", {})[name] = [rx, tx]
            totals[name] = totals.get(name, 0.0) + rx + tx
    off_loop = {n: b for n, b in totals.items() if n != LOOPBACK}
    pool = off_loop if nodes > 1 else totals
    main = max(sorted(pool), key=lambda n: pool[n], default="")
    iface = named[0] if len(named) == 1 else ",".join(named)
    share = pool.get(iface, 0.0) / sum(pool.values()) if pool and sum(pool.values()) > 0 else float("nan")
    if nodes <= 1 or not pool:
        check = "not checked"
    elif len(named) == 1 and share >= MAIN_SHARE:
        check = "ok"
    else:
        check = "wrong-interface"
    return {
        "iface": iface,
        "net_main_iface": main,
        "net_iface_share": share,
        "net_bytes_per_iter": pool.get(iface, 0.0),
        "net_bytes_json": json.dumps(per_host, sort_keys=True),
        "net_check": check,
    }
