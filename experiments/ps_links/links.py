"""Per-link bytes of parameter-server cells on the testbed (experiments/ps_links/run.py writes the report):
what each host's link carried per iteration, against what the placement predicts."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from harness.core.errors import UserError

MB = 1e6


def expected_gradients(row) -> float | None:
    """Gradients each way per iteration through a worker host's link, for a PS cell with dedicated
    server hosts; None for other cells. Pure."""
    if not str(row["scheme"]).endswith("-ps") or row.get("server_hosts") != "dedicated":
        return None
    knobs = json.loads(row["knobs_json"] or "{}")
    return 1.0 if int(knobs.get("local_reduce", 1)) else float(row["workers_per_node"])


def link_rows(run_dir: Path) -> pd.DataFrame:
    """One row per (cell, worker host): received and sent bytes per iteration through the host's testbed
    interface, in bytes and in gradients, with the cell's throughput."""
    path = run_dir / "summary.parquet"
    if not path.exists():
        raise UserError(f"{path} does not exist: give the run directory of `ddlbench sweep sweeps/testbed-ps.yaml`")
    summary = pd.read_parquet(path)
    out = []
    for _, r in summary[(summary["status"] == "ok") & (summary["scheme"] != "local")].iterrows():
        result_path = run_dir / "cells" / r["cell_id"] / "result.json"
        rank_hosts = (
            json.loads(result_path.read_text()).get("dist", {}).get("rank_hosts", []) if result_path.exists() else []
        )
        grad = float(r["grad_bytes"])
        knobs = json.loads(r["knobs_json"] or "{}")
        for reader, ifaces in sorted(json.loads(r["net_bytes_json"] or "{}").items()):
            rank = int(reader.split("@")[0].removeprefix("rank"))
            rx, tx = ifaces.get(r["iface"], [0.0, 0.0])
            out.append(
                {
                    "network": r["network"],
                    "scheme": r["scheme"],
                    "local_reduce": knobs.get("local_reduce", "") if str(r["scheme"]).endswith("-ps") else "",
                    "server_hosts": r.get("server_hosts", ""),
                    "host": rank_hosts[rank] if rank < len(rank_hosts) else reader,
                    "rx_mb_per_iter": rx / MB,
                    "tx_mb_per_iter": tx / MB,
                    "grad_mb": grad / MB,
                    "rx_grads": rx / grad,
                    "tx_grads": tx / grad,
                    "expected_grads_each_way": expected_gradients(r),
                    "throughput_median": r["throughput_median"],
                    "iter_s_median": r["iter_s_median"],
                    "samples": r["samples"],
                    "nodes": r["nodes"],
                    "workers_per_node": r["workers_per_node"],
                    "rate_mbit": r.get("network_rate_mbit"),
                }
            )
    if not out:
        raise UserError(f"{run_dir} has no ok cell with interface counters: run the sweep on the testbed first")
    df = pd.DataFrame(out)
    order = {n: i for i, n in enumerate(dict.fromkeys(summary["network"]))}  # the sweep's profile order
    return df.sort_values(
        ["network", "scheme", "local_reduce", "host"],
        kind="stable",
        key=lambda c: c.map(order) if c.name == "network" else c.astype(str),
    ).reset_index(drop=True)


def _fmt(v, digits=2):
    return (
        ""
        if v is None or (isinstance(v, float) and pd.isna(v))
        else (f"{v:.{digits}f}" if isinstance(v, float) else str(v))
    )


def busiest_links(df: pd.DataFrame) -> pd.DataFrame:
    """Per cell: the link that carries the most bytes in one direction per iteration (a worker host's,
    measured, or the dedicated server host's, inferred as the sum of what the worker hosts send) and the
    time those bytes take at the link's rate: a lower bound of the iteration. Pure."""
    rows = []
    for (net, scheme, lr), g in df.groupby(["network", "scheme", "local_reduce"], sort=False):
        worker = float(g[["rx_mb_per_iter", "tx_mb_per_iter"]].to_numpy().max())
        link, mb = "worker host", worker
        if str(scheme).endswith("-ps") and (g["server_hosts"] == "dedicated").all():
            server = float(g["tx_mb_per_iter"].sum())
            if server > worker:
                link, mb = "server host (inferred)", server
        rate = pd.to_numeric(g["rate_mbit"], errors="coerce").iloc[0]  # NaN: rate unknown, no bound
        rows.append(
            {
                "network": net,
                "scheme": scheme,
                "local_reduce": lr,
                "link": link,
                "mb": mb,
                "bound_s": mb * MB * 8 / (rate * 1e6),
                "iter_s": float(g["iter_s_median"].iloc[0]),
            }
        )
    return pd.DataFrame(rows)


def markdown(df: pd.DataFrame, run_dir: Path) -> str:
    lines = [
        "# Bytes per host link: hierarchical vs flat parameter server vs all-reduce (testbed)",
        "",
        f"From `{run_dir.name}` (`ddlbench sweep sweeps/testbed-ps.yaml`), written by "
        "`python -m experiments.ps_links.run`. Per worker host: bytes received (rx) and sent (tx) through its "
        "testbed link per iteration (warm-up and measured iterations; interface counters), in MB and "
        "in gradients; `expected` is the gradients each way a PS cell with a dedicated server host "
        "should move: 1 with local reduce, one per worker on the host without. Throughput is the "
        "cell's median (samples/s of the 4 workers); the hosts share this machine's cores.",
        "",
    ]
    grad = df["grad_mb"].iloc[0]
    lines += [f"Gradient: {grad:.2f} MB per worker.", ""]
    head = [
        "network",
        "scheme",
        "local_reduce",
        "servers on",
        "host",
        "rx MB/iter",
        "tx MB/iter",
        "rx grads",
        "tx grads",
        "expected each way",
        "throughput",
        "iter s",
    ]
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in df.itertuples():
        lines.append(
            "| "
            + " | ".join(
                [
                    r.network,
                    r.scheme,
                    _fmt(r.local_reduce),
                    _fmt(r.server_hosts),
                    r.host,
                    _fmt(r.rx_mb_per_iter),
                    _fmt(r.tx_mb_per_iter),
                    _fmt(r.rx_grads),
                    _fmt(r.tx_grads),
                    _fmt(r.expected_grads_each_way, 0),
                    _fmt(r.throughput_median),
                    _fmt(r.iter_s_median, 3),
                ]
            )
            + " |"
        )
    lines += [
        "",
        "## The busiest link",
        "",
        "An iteration cannot be shorter than the time its busiest link needs for its bytes. A worker host's",
        "link is measured above. The dedicated server host's link is inferred from those counters: every",
        "byte a worker host sends to the servers arrives there, so it receives the worker hosts' sent bytes",
        "(servers do not read counters). One server host serves every worker host: with local reduce it",
        "takes one gradient per worker host each way, so at 2 worker hosts it carries twice what a worker",
        "link does, and the hierarchical PS is bound by it, while a ring all-reduce's busiest link carries",
        "2(N-1)/N = 1.5 gradients at N = 4. The study gave the servers as many hosts as the workers had",
        'NICs\' worth of traffic (one server host per 4 GPUs, docs/ARCHITECTURE.md "Server placement").',
        "",
    ]
    lines += [
        "| network | scheme | local_reduce | busiest link | MB each way | its time at the link rate, s "
        "| measured iter s |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in busiest_links(df).itertuples():
        lines.append(
            f"| {r.network} | {r.scheme} | {_fmt(r.local_reduce)} | {r.link} | {r.mb:.1f} | "
            f"{r.bound_s:.3f} | {r.iter_s:.3f} |"
        )
    few = int(df["samples"].min())
    if few < 5:
        lines += ["", f"Only {few} measured iteration(s) per cell: a smoke run, not a measurement."]
    return "\n".join(lines) + "\n"
