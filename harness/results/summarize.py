"""Turn one cell's gathered samples into tidy rows (pure functions of the result dict).

raw rows: one per (rank, iteration); summary row: the slowest rank per iteration, statistics,
breakdown. Speed-up, scaling efficiency and exposed communication need the sweep's measured 1-worker
baseline and are filled in by `add_scaling` over the whole summary table.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd

from harness.core.schema import RAW_COLUMNS, SCHEMA_VERSION, SUMMARY_COLUMNS
from harness.measure.stats import describe, slowest_rank
from harness.measure.stoprule import relative_half_width
from harness.results.netcheck import network_columns
from harness.results.peaks import ImpossibleMFU, mfu, peak_tflops, single_model

PHASES = ("forward_s", "forward_wait_s", "backward_s", "comm_wait_s", "optimizer_s")
"""forward_wait_s: absent from runs before it was measured (their forward_s includes those waits): NaN."""
HOST = ("host_issue_s", "device_lag_s")
"""The host's side of each iteration (harness/measure/timer.py); NaN in runs from before they were recorded."""
HOST_BOUND_LAG = 0.5
"""A CUDA cell is host-bound when the device stays less than this share of an iteration behind the host
(median `device_lag_s` < HOST_BOUND_LAG x median iteration): a host iteration more than 1.5x as long as the
device's then starves the device, so the host's pace, not the GPU's, sets the cell's. Chosen from the H200
runs (docs/ARCHITECTURE.md, "Host-bound cells and MFU"): the host-bound cells lay at 0.002-0.08 of an iteration
behind (gpt2-small bf16: 3.1 ms of 37.5 ms), the steady ones at 0.99-1.7, and a host-bound iteration moved by
up to 1.46x from one to the next (bert-base bf16: 28 to 41 ms), which half an iteration queued absorbs."""


def raw_rows(run_id: str, cell_id: str, result: dict) -> pd.DataFrame:
    rows = []
    for rk in result["ranks"]:
        for s in rk["samples"]:
            rows.append(
                {
                    "schema_version": SCHEMA_VERSION,
                    "run_id": run_id,
                    "cell_id": cell_id,
                    "rank": rk["rank"],
                    **{k: s.get(k, math.nan) for k in ("iteration", "iter_s", *PHASES, *HOST)},
                }
            )
    return pd.DataFrame(rows, columns=RAW_COLUMNS)


def axes(
    run_id: str,
    cell,
    status: str,
    reason: str = "",
    log_tail: str = "",
    sample_unit: str = "",
    nodes: int | None = None,
    server_hosts: str | None = None,
) -> dict:
    knobs = dict(cell.knobs)
    if server_hosts is None:  # the launcher did not say: one box is colocated; a failed cell keeps the request
        asked = getattr(cell, "server_hosts", "auto")
        server_hosts = "" if not cell.servers else ("colocated" if status == "ok" else asked)
    row = {
        "schema_version": SCHEMA_VERSION,
        "run_id": run_id,
        "cell_id": cell.cell_id,
        "source": "measured",
        "status": status,
        "reason": reason,
        "log_tail": log_tail,
        "workload": cell.workload,
        "sample_unit": sample_unit,
        "scheme": cell.scheme,
        "backend": cell.backend,
        "workers": cell.workers,
        "nodes": nodes or cell.nodes,
        "workers_per_node": -(-cell.workers // (nodes or cell.nodes)),
        "servers": cell.servers,
        "server_hosts": server_hosts,
        "batch_per_worker": cell.batch,
        "global_batch": (cell.batch or 0) * cell.workers,
        "seq_len": cell.seq_len,
        "dtype": cell.dtype,
        "device": cell.device,
        # what the cell asked for; a measured row replaces it with what its group really used
        "dist_backend": cell.dist_backend,
        "network": cell.network,
        "network_rate_mbit": cell.network_rate_mbit,
        "warmup": cell.warmup,
        "iters": cell.iters,
        "knobs_json": json.dumps(knobs, sort_keys=True),
    }
    for k, v in knobs.items():
        row[f"knob_{k}"] = v
    return row


def summary_row(run_id: str, cell, result: dict, sample_unit: str, wall_s: float) -> dict:
    per_rank = {rk["rank"]: [s["iter_s"] for s in rk["samples"]] for rk in result["ranks"]}
    iter_s, straggler = slowest_rank(per_rank)
    d = describe(iter_s)
    gb = cell.batch * cell.workers
    tp = describe([gb / t for t in iter_s if t > 0])
    # breakdown: phases of whichever rank was slowest in each iteration, then medians
    ranks = sorted(per_rank)
    m = np.array([per_rank[r] for r in ranks])
    worst = m.argmax(axis=0)
    by_rank = {rk["rank"]: rk["samples"] for rk in result["ranks"]}
    phase = {
        p: float(np.median([by_rank[ranks[w]][i].get(p, math.nan) for i, w in enumerate(worst)]))
        for p in (*PHASES, *HOST)
    }
    rank_medians = {r: float(np.median(v)) for r, v in per_rank.items()}
    facts = result["facts"]
    comm_bytes = facts.get("comm_bytes_per_iter", 0)
    # model intensity is a per-workload figure: one worker's FLOPs per iteration over the bytes that
    # worker communicates per iteration (independent of N under weak scaling)
    flops_iter = facts.get("flops_per_sample", math.nan) * cell.batch
    gpu = facts.get("gpu_models", "")
    utilisation, refused = device_utilisation(
        facts.get("flops_per_sample"), tp["median"] / cell.workers, single_model(gpu), cell.dtype
    )
    reason, log_tail = shutdown_warnings(result)
    if refused:
        reason = "; ".join(x for x in (reason, f"warning: {refused}") if x)
    row = axes(
        run_id,
        cell,
        "ok",
        reason,
        log_tail,
        sample_unit=sample_unit,
        nodes=result.get("dist", {}).get("nodes"),
        server_hosts=result.get("dist", {}).get("server_hosts"),
    )
    row["warmup"] = result.get("effective", {}).get("warmup", cell.warmup)  # profiling may extend it
    row.update(
        {
            "iter_s_median": d["median"],
            "iter_s_q1": d["q1"],
            "iter_s_q3": d["q3"],
            "iter_s_iqr": d["iqr"],
            "iter_s_mean": d["mean"],
            "iter_s_std": d["std"],
            "iter_s_ci95_low": d["ci95_low"],
            "iter_s_ci95_high": d["ci95_high"],
            "iter_s_cv": d["cv"],
            "samples": d["n"],
            **stop_columns(cell, result, iter_s),
            "throughput_median": tp["median"],
            "throughput_mean": tp["mean"],
            "throughput_ci95_low": tp["ci95_low"],
            "throughput_ci95_high": tp["ci95_high"],
            "throughput_iqr": tp["iqr"],
            **phase,
            "comm_only_s": float(result["ranks"][0].get("comm_only_s", 0.0)),
            # rank 0's start-up (docs/ARCHITECTURE.md, "Warm ranks"): absent where the launcher set no placing time
            "startup_s": float(result["ranks"][0].get("startup_s", math.nan)),
            "rank_start": str(result["ranks"][0].get("rank_start", "")),
            "host_heap": str(result["ranks"][0].get("host_heap", "")),
            "straggler_rank": straggler,
            "rank_iter_s_min": min(rank_medians.values()),
            "rank_iter_s_max": max(rank_medians.values()),
            "params": facts.get("params"),
            "grad_bytes": facts.get("grad_bytes"),
            "flops_per_sample": facts.get("flops_per_sample"),
            "comm_bytes_per_iter": comm_bytes,
            "intensity_flops_per_byte": flops_iter / comm_bytes if comm_bytes else math.nan,
            "wall_s": wall_s,
            "plan_json": json.dumps(result.get("plan", {}), sort_keys=True, default=str),
            "gpu_models": gpu,
            "host_bound": host_bound(cell.device, phase["device_lag_s"], d["median"]),
            "mfu": utilisation,
            "device_peak_tflops": peak_tflops(single_model(gpu), cell.dtype),
            "dist_backend": dist_backend(result["ranks"]),  # "" for a cell without communication
            **network_columns(result["ranks"], row["nodes"]),
            **cpu_columns(result.get("dist", {})),
        }
    )
    return row


def stop_columns(cell, result: dict, iter_s: list[float]) -> dict:
    """How the cell stopped (harness/measure/stoprule.py): its precision target, the relative half-width of
    its median's 95% CI reached over `iter_s` (the slowest rank's iterations) and the reason; a fixed cell
    (no --precision) is `fixed` with neither figure, as rows were before the stop rule. Pure."""
    if cell.precision is None:
        return {"precision_target": math.nan, "precision_reached": math.nan, "stop_reason": "fixed"}
    return {
        "precision_target": float(cell.precision),
        "precision_reached": relative_half_width(iter_s),
        "stop_reason": str(result.get("effective", {}).get("stop_reason", "fixed")),
    }


def short_of_precision(summary: pd.DataFrame) -> list[str]:
    """One line per cell that stopped at a bound (`max-iters`, `max-time`) before its median was as precise as
    asked (README, "Measuring"); none for rows without a stop rule or from before it. Pure."""
    if "stop_reason" not in summary:
        return []
    short = summary[summary["stop_reason"].isin(["max-iters", "max-time"])]
    return [
        f"{r['cell_id']}: precision not reached, its median +-{r['precision_reached']:.1%} of +-"
        f"{r['precision_target']:.1%} asked ({r['stop_reason']} after {int(r['samples'])} iterations)"
        for _, r in short.iterrows()
    ]


def cpu_columns(dist: dict) -> dict:
    """The emulated hosts' CPU share and the cell's throttling, as the testbed launcher recorded them in the
    result's `dist` (NaN and "" where there was no share, as on every other launcher). Pure."""

    def number(key: str) -> float:
        v = dist.get(key)
        return math.nan if v is None else float(v)

    return {
        "host_cpus": number("host_cpus"),
        "host_cores": number("host_cores"),
        "throttled_periods": number("throttled_periods"),
        "throttled_s": number("throttled_s"),
        "throttled_json": str(dist.get("throttled_json", "")),
    }


def host_bound(device: str, device_lag_s: float, iter_s: float) -> bool | None:
    """True when the device stays less than HOST_BOUND_LAG of an iteration behind the host; None on the CPU,
    where the host is the device, and for runs from before the device lag was recorded. Pure."""
    if device != "cuda" or not all(v == v for v in (device_lag_s, iter_s)) or iter_s <= 0:
        return None
    return bool(device_lag_s < HOST_BOUND_LAG * iter_s)


def row_host_heap(r) -> str:
    """A summary row's `host_heap` (harness/measure/host_heap.py): `kept` or `default` (its reason dropped:
    `default (not glibc)` is the allocator as it started too); a row from before the column ran with the
    allocator as it started, so it is `default`."""
    v = r.get("host_heap")
    return v.split()[0] if isinstance(v, str) and v.strip() else "default"


def row_host_bound(r) -> bool | None:
    """A summary row's `host_bound`, or, for a row from before the column (it had `launch_bound`, a narrower
    rule), the same rule applied to its own device lag and iteration."""
    v = r.get("host_bound")
    if v is not None and pd.notna(v):
        return bool(v)
    return host_bound(str(r.get("device", "")), _number(r.get("device_lag_s")), _number(r.get("iter_s_median")))


def _number(v) -> float:
    """A float, NaN for None or anything not a number."""
    v = pd.to_numeric(v, errors="coerce") if v is not None else math.nan
    return float(v) if pd.notna(v) else math.nan


def device_utilisation(
    flops_per_sample, per_device_per_s: float, device_name: str, dtype: str
) -> tuple[float | None, str]:
    """(MFU or None, '' or the reason an impossible MFU was refused) of one device of the cell."""
    try:
        return mfu(flops_per_sample, per_device_per_s, device_name, dtype), ""
    except ImpossibleMFU as e:
        return None, str(e)


def dist_backend(ranks: list[dict]) -> str:
    """What moved the workers' tensors, as every rank recorded it (dist.get_backend of its group; horovod-*
    for Horovod's own): one name, or several joined by commas when ranks disagree; "" without a transport."""
    return ",".join(sorted({r.get("dist_backend", "") for r in ranks} - {""}))


def shutdown_warnings(result: dict) -> tuple[str, str]:
    """(reason, log_tail) of a measured cell: what failed after its result was complete, as a warning
    (harness/procs/supervisor.Shutdown), with each failing process's last log line; ("", "") if nothing."""
    warnings = result.get("warnings") or []
    if not warnings:
        return "", ""
    return (
        "warning: " + "; ".join(w["warning"] for w in warnings),
        "\n".join(w["log"] for w in warnings if w.get("log")),
    )


def failed_row(run_id: str, cell, reason: str, log_tail: str, sample_unit: str, wall_s: float) -> dict:
    row = axes(run_id, cell, "failed", reason=reason, log_tail=log_tail, sample_unit=sample_unit)
    row["wall_s"] = wall_s
    return row


BASELINE_KEYS = ["workload", "batch_per_worker", "seq_len", "device", "dtype", "network"]  # per network profile


SCALING_COLUMNS = (
    "baseline_throughput",
    "speedup",
    "scaling_efficiency",
    "compute_only_iter_s",
    "exposed_comm_s",
    "overlap_ratio",
)
"""What the run's summary table adds to its cells' parts (add_scaling): computed across cells, no part's own."""


def add_scaling(summary: pd.DataFrame) -> pd.DataFrame:
    """Speed-up, scaling efficiency, exposed communication and overlap against the sweep's own
    measured 1-worker `local` baseline of the same workload, batch and sequence length."""
    df = summary.copy()
    for col in SCALING_COLUMNS:
        df[col] = np.nan
    ok = df["status"] == "ok"
    base = df[ok & (df["scheme"] == "local") & (df["workers"] == 1)]
    for _, b in base.iterrows():
        same = ok.copy()
        for k in BASELINE_KEYS:
            same &= (df[k] == b[k]) | (df[k].isna() & pd.isna(b[k]))
        x1, t1 = b["throughput_median"], b["iter_s_median"]
        df.loc[same, "baseline_throughput"] = x1
        df.loc[same, "compute_only_iter_s"] = t1
        df.loc[same, "speedup"] = df.loc[same, "throughput_median"] / x1
        df.loc[same, "scaling_efficiency"] = df.loc[same, "throughput_median"] / (df.loc[same, "workers"] * x1)
        exposed = (df.loc[same, "iter_s_median"] - t1).clip(lower=0.0)
        df.loc[same, "exposed_comm_s"] = exposed
        comm = df.loc[same, "comm_only_s"]
        df.loc[same, "overlap_ratio"] = np.where(comm > 0, (1 - exposed / comm).clip(0.0, 1.0), np.nan)
    cols = [c for c in SUMMARY_COLUMNS if c in df.columns] + [c for c in df.columns if c not in SUMMARY_COLUMNS]
    return df[cols]
