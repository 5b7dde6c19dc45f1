"""The one-node calibration in the study's report (harness/study/calibration.py; docs/ARCHITECTURE.md,
"Calibration"): the fitted parameters beside their sourced ranges, the fitted cells, leave-one-workload-out, and
the calibrated curve beside the uncalibrated one."""

from __future__ import annotations

import math

import pandas as pd


def _num(x: float, unit: str) -> str:
    if not isinstance(x, (int, float)) or not math.isfinite(x):
        return "-"
    if unit == "s":
        return f"{x * 1e6:.3g} us"
    return f"{x:.3g}"


def params_table(table: pd.DataFrame) -> str:
    """One row per fitted parameter: value, interval, sourced range, whether the cells determine it and which."""
    lines = [
        "| parameter | fitted | 10th-90th pct | sourced value [range] | inside the sourced range | determined by |",
        "|---|---|---|---|---|---|",
    ]
    for r in table.itertuples():
        unit = r.unit
        u = "" if unit in ("s", "x") else f" {unit}"
        inside = "-" if r.inside_sourced is None else ("yes" if r.inside_sourced else "**no**")
        det = (
            ", ".join(dict.fromkeys(f"{k[0]} {k[2]}" for k in r.cells))
            if r.determined
            else (
                f"nothing near the fit: not determined by one node; the cells allow {_num(r.allowed_low, unit)}-"
                f"{_num(r.allowed_high, unit)} of its sourced range, which its draws take"
            )
        )
        lines.append(
            f"| `{r.parameter}` | {_num(r.value, unit)}{u} | {_num(r.low, unit)}-{_num(r.high, unit)} | "
            f"{_num(r.sourced_value, unit)} [{_num(r.sourced_low, unit)}-{_num(r.sourced_high, unit)}] | "
            f"{inside} | {det} |"
        )
    return "\n".join(lines)


def two_node_cells_table(cells: pd.DataFrame, skipped: pd.DataFrame) -> str:
    """Measured and fitted throughput of every two-node cell, per network; the ones set aside named."""
    lines = ["| workload | method | network | measured | fitted | error |", "|---|---|---|---|---|---|"]
    for r in cells.itertuples():
        lines.append(
            f"| {r.workload} | {r.scheme} | {r.network} | {r.measured:.1f} | {r.predicted:.1f} | {r.error:+.1%} |"
        )
    for r in skipped.itertuples():
        lines.append(
            f"| {r.workload} | {r.scheme} | {r.network} | {r.throughput:.1f} | set aside: equals its "
            f"{r.agrees_with} cell ({r.other_throughput:.1f}) | - |"
        )
    return "\n".join(lines)


def error_grid(table: pd.DataFrame) -> str:
    """A method x network table of median absolute errors (leave-one-workload-out on the two-node column)."""
    lines = ["| method | " + " | ".join(table.columns) + " |", "|---|" + "---|" * len(table.columns)]
    for m, r in table.iterrows():
        lines.append(f"| {m} | " + " | ".join("-" if pd.isna(x) else f"{x:.1%}" for x in r) + " |")
    return "\n".join(lines)


def cells_table(cells: pd.DataFrame) -> str:
    """Measured and fitted throughput of every one-node cell, the three network columns as their mean."""
    t = cells.groupby(["workload", "scheme"], sort=False).agg(
        measured=("measured", "mean"),
        predicted=("predicted", "mean"),
        spread=("measured", lambda x: x.max() / x.min() - 1),
    )
    t["error"] = t["predicted"] / t["measured"] - 1
    lines = [
        "| workload | method | measured (mean of 3 networks) | fitted | error | measured spread over networks |",
        "|---|---|---|---|---|---|",
    ]
    for (w, m), r in t.iterrows():
        lines.append(f"| {w} | {m} | {r.measured:.1f} | {r.predicted:.1f} | {r.error:+.1%} | {r.spread:.1%} |")
    return "\n".join(lines)


def lowo_table(summary: pd.DataFrame) -> str:
    """Leave-one-workload-out per method: the median error of each held-out workload's cells, median |error|."""
    held = [c for c in summary.columns if c not in ("median_abs", "max_abs")]
    lines = [
        "| method | " + " | ".join(f"{h} held out" for h in held) + " | median abs | max abs |",
        "|---|" + "---|" * (len(held) + 2),
    ]
    for m, r in summary.iterrows():
        lines.append(
            f"| {m} | " + " | ".join(f"{r[h]:+.1%}" for h in held) + f" | {r['median_abs']:.1%} | {r['max_abs']:.1%} |"
        )
    return "\n".join(lines)


def comparison_table(cal: pd.DataFrame, raw: pd.DataFrame, methods: list[str]) -> str:
    """Per size: the best method per (workload, network) row calibrated and uncalibrated, and how far the
    calibrated curve moved each method (median change of its cells)."""
    key = ["workload", "network", "workers", "scheme"]
    both = cal[[*key, "throughput_median"]].merge(raw[[*key, "throughput_median"]], on=key, suffixes=("", "_raw"))
    both = both[both["scheme"].isin(methods)]
    both["change"] = both["throughput_median"] / both["throughput_median_raw"] - 1
    lines = [
        "| GPUs | best (calibrated) | best (uncalibrated) | rows where they differ | " + " | ".join(methods) + " |",
        "|---|---|---|---|" + "---|" * len(methods),
    ]
    for n in sorted(both["workers"].unique()):
        at = both[both["workers"] == n]
        best = {}
        for col in ("throughput_median", "throughput_median_raw"):
            idx = at.groupby(["workload", "network"])[col].idxmax()
            best[col] = at.loc[idx].set_index(["workload", "network"])["scheme"]
        tally = {c: ", ".join(f"{m} {k}" for m, k in b.value_counts().items()) for c, b in best.items()}
        differ = int((best["throughput_median"] != best["throughput_median_raw"]).sum())
        per = at.groupby("scheme")["change"].median()
        moved = " | ".join(f"{per.get(m, math.nan):+.0%}" for m in methods)
        lines.append(
            f"| {int(n)} | {tally['throughput_median']} | {tally['throughput_median_raw']} | {differ} of "
            f"{len(best['throughput_median'])} | {moved} |"
        )
    return "\n".join(lines)


READING = {
    # what a fitted value outside its sourced range most likely says about the 2019 stacks (hypotheses, stated
    # as such in the report; each would need its own microbenchmark on the study's hardware to settle)
    "py_op_s": "every per-tensor host cost of the Horovod scripts lands here (the optimizer's ops, but also the "
    "per-gradient hook into Horovod and its handle's synchronize), all of which the fit sees only as "
    "time per tensor",
    "d2d_gbyte_s": "the optimizer's and the merge copies' memory passes ran at well under the card's achievable "
    "bandwidth (small kernels, PyTorch 1.4's unfused elementwise ops)",
    "overlap_compute_slowdown": "backward's kernels lose nothing measurable to NCCL's one or two blocks per "
    "channel: the slowdown is on the communication side",
    "overlap_comm_slowdown": "collectives and copies beside backward run markedly slower than alone: the host "
    "path and memory they share with compute",
    "bs_fwd_gap_s": "ByteScheduler's plugin serialises the forward with the host, a gap per layer that no code "
    "reading predicted (its sourced value is 0: torch's launches run ahead of the GPU)",
    "bs_partition_cpu_s": "the scheduler's Python per partition is slower than its code suggests",
    "gil_convoy_share": "the poller wins fewer GIL hand-offs on the study's hosts than in the microbenchmark here",
    "shm_edge_gbyte_s": "NCCL's edge through host memory is faster or slower than the sourced measurements",
    "byteps_nccl_edge_gbyte_s": "BytePS's partition-sized collectives run at another rate than the sourced ones",
    # the transports, fitted from two nodes (harness/study/two_node.py)
    "eth_gbit_s": "the ring over 10 GbE is not bound by the wire at the cells' sizes (another part binds first), so "
    "any rate near the line rate fits; a rate above TCP's payload at a 1500-byte MTU is not physical",
    "eth_van_gbyte_s": "ps-lite's one ZeroMQ I/O thread pays the kernel's per-packet work of both directions at a "
    "1500-byte MTU on the study's 2019 Xeons: far below the loopback figure measured here",
    "zmq_van_gbyte_s": "the van's one I/O thread over IPoIB (TCP without segmentation offload) on the study's hosts "
    "moves less than over loopback here",
    "server_sum_gbyte_s": "a BytePS server sums more slowly than a memory-bound dst += src (its engine threads "
    "copy, lock and sum per key), or the sum stands for other per-byte work of the server",
    "server_recv_s": "a server's per-message work (ps-lite's van, the request's copy, the engine's queue and its "
    "lock) costs far more than the handler's C++ alone",
    "byteps_signal_s": "BytePS's coordination between a node's processes costs another amount per partition",
    "ipoib_gbit_s": "NCCL's socket transport over IPoIB reaches more than one TCP stream's sourced rate (several "
    "sockets or threads per connection, or connected mode at its best)",
    "host_path_gbyte_s": "the node's PCIe path carries more than the sourced layout allows",
    "ib_gbyte_s": "NCCL's rate through the NIC without GPUDirect is lower than nccl-tests reach with it",
    "tcp_message_s": "the kernel's cost per TCP message on the study's hosts differs from the VM measured here",
}
"""A reading of each parameter when its fitted value falls outside its sourced range."""


def outside_lines(table: pd.DataFrame) -> list[str]:
    """One line per fitted parameter outside its sourced range: how far, and what that most likely says."""
    out = []
    for r in table.itertuples():
        if r.inside_sourced is not False or not r.determined:
            continue
        u = "" if r.unit in ("s", "x") else f" {r.unit}"
        side = "above" if r.value > r.sourced_high else "below"
        ratio = f", {r.value / r.sourced_value:.2g}x its sourced value" if r.sourced_value else ""
        out.append(
            f"`{r.parameter}` fitted {_num(r.value, r.unit)}{u}{ratio}, {side} its sourced range "
            f"[{_num(r.sourced_low, r.unit)}-{_num(r.sourced_high, r.unit)}]: most likely "
            f"{READING.get(r.parameter, 'a cost its sources do not cover')}."
        )
    return out
