"""The report's tables (pure): tidy rows -> small DataFrames of formatted strings, headers with units."""

from __future__ import annotations

import math

import pandas as pd

from harness.report.data import measured, schemes
from harness.results.fingerprints import library_columns
from harness.results.machine_load import verdict
from harness.results.summarize import row_host_bound


def _f(v, spec: str, scale: float = 1.0) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)) or v is pd.NA:
        return "-"
    try:
        return format(float(v) * scale, spec)
    except (TypeError, ValueError):
        return str(v)


def _sorted(s: pd.DataFrame) -> pd.DataFrame:
    rank = {n: i for i, n in enumerate(schemes(s, include_local=True))}
    s = s.assign(_o=s["scheme"].map(rank).fillna(99))
    keys = [k for k in ("workload", "network", "dtype", "_o", "backend", "workers", "cell_id") if k in s]
    return s.sort_values(keys).drop(columns="_o")


def cores_shared(r, cpu_count: float, one_box: bool) -> bool:
    """Do a CPU cell's ranks leave no core free on a box (docs/ARCHITECTURE.md, "Measurement hygiene")?
    workers x threads (+ servers) on one box >= its cores: gloo's copies and sums need a core too, so
    communication can only run in compute's time slices and the overlap ratio cannot rise above 0.
    The box is the whole machine on one box or the emulated testbed, else one node."""
    if r.get("device") not in (None, "cpu") or not cpu_count or int(r.get("workers") or 1) < 2:
        return False
    threads = int(r.get("threads") or 1) if pd.notna(r.get("threads", 1)) else 1
    servers = int(r.get("servers") or 0) if pd.notna(r.get("servers")) else 0
    nodes = int(r.get("nodes") or 1) if pd.notna(r.get("nodes")) else 1
    ranks = (
        int(r["workers"]) * threads + servers
        if (one_box or nodes == 1)
        else int(r.get("workers_per_node") or r["workers"]) * threads + -(-servers // nodes)
    )
    return ranks >= cpu_count


def _boxes(env: pd.DataFrame | None) -> dict:
    """run -> (cores, one box?) from the environment table (the testbed's hosts are one machine)."""
    out = {}
    for _, e in env.iterrows() if env is not None and not env.empty else []:
        one = "testbed_hosts" in e and pd.notna(e.get("testbed_hosts"))
        out[e.get("run", e.get("run_id"))] = (float(e.get("cpu_count") or 0), one)
    return out


SHARED_MARK = "†"
SHARED_NOTE = (
    f"{SHARED_MARK} overlap cannot be above 0 here: the cell's ranks (workers x threads, plus "
    f"servers) take every core of the machine, so communication (gloo's copies and sums run on "
    f"the CPU) only runs in compute's time slices; read these cells' exposed time, not their overlap."
)


HOST_MARK = "‡"
HOST_WHY = (
    "the GPU stayed less than half an iteration behind the host, so the host's pace (Python and kernel "
    "launches) sets these cells' and they measure the host, not the GPU or the network: a comparison of "
    "methods on them says little about communication, and their numbers move with the host's speed "
    "from one minute to the next. What they still tell: how fast this host issues this method's work "
    "at this batch. To measure the GPU instead, give each GPU more work per iteration (a larger "
    "per-GPU batch or sequence)."
)
HOST_NOTE = f"{HOST_MARK} host-bound: {HOST_WHY}"


def summary_table(summary: pd.DataFrame, env: pd.DataFrame | None = None) -> tuple[pd.DataFrame, str]:
    """One short line per measured cell, about 110 characters wide: median X with the 95% CI of the
    mean as +-, CV, efficiency, exposed comm, overlap. Columns whose value is the same in every row go
    into the caption (returned second); the full summary is in the report's summary.csv/.parquet."""
    s = _sorted(measured(summary))
    boxes = _boxes(env)
    rows, shared, hosted = [], False, False
    with_mfu = "mfu" in s and s["mfu"].notna().any()
    for _, r in s.iterrows():
        cores, one_box = boxes.get(r.get("run"), boxes.get(r.get("run_id"), (0, False)))
        scheme = r["scheme"] + ("" if r.get("backend") in (None, "torch") else f"/{r['backend']}")
        if pd.notna(r.get("servers")) and r.get("servers") and int(r["servers"]):
            scheme += f" S={int(r['servers'])}"
        if isinstance(r.get("dtype"), str) and r["dtype"] not in ("", "fp32"):
            scheme += f" {r['dtype']}"
        okay = r["status"] == "ok"
        lo, hi = pd.to_numeric(pd.Series([r.get("throughput_ci95_low"), r.get("throughput_ci95_high")]))
        half = (hi - lo) / 2 if okay else None  # NaN when the row has no CI: printed "-"
        ovl = _f(r.get("overlap_ratio"), ".2f")
        if okay and ovl != "-" and cores_shared(r, cores, one_box):
            ovl, shared = ovl + SHARED_MARK, True
        mark = HOST_MARK if okay and row_host_bound(r) else ""
        hosted = hosted or bool(mark)
        row = {
            "workload": r["workload"],
            "network": str(r.get("network") or "-"),
            "scheme": scheme,
            "N": int(r["workers"]),
            "X/s (±95% CI)": f"{_f(r.get('throughput_median'), '.1f')} ±{_f(half, '.1f')}{mark}"
            if okay
            else r["status"],
            "CV": _f(r.get("iter_s_cv"), ".3f"),
            "eff.": _f(r.get("scaling_efficiency"), ".2f"),
            "exp. ms": _f(r.get("exposed_comm_s"), ".0f", 1e3),
            "overlap": ovl,
        }
        if with_mfu:
            row["MFU"] = _f(r.get("mfu"), ".0%")
        rows.append(row)
    df = pd.DataFrame(rows)
    caption = []
    for col in ("workload", "network", "N"):
        if len(df) > 1 and df[col].nunique() == 1:
            if df[col].iloc[0] != "loopback":  # one box, the default: nothing to say
                caption.append(f"{col}: {df[col].iloc[0]}")
            df = df.drop(columns=col)
    head = (
        "X = median throughput over iterations; ± = half width of the 95% CI of the mean; CV of the "
        "iteration time; eff. = X_N/(N·X₁); exp. ms = exposed communication (median iteration - 1-worker "
        "compute-only iteration)"
        + ("; MFU = model FLOPs utilisation of one GPU against its dense peak for the dtype" if with_mfu else "")
    )
    text = head + (f"; same in every row: {', '.join(caption)}" if caption else "") + "."
    return df, text + (f" {SHARED_NOTE}" if shared else "") + (f" {HOST_NOTE}" if hosted else "")


def failed_table(bad: pd.DataFrame) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "cell": r["cell_id"],
                "run": r.get("run", ""),
                "status": r["status"],
                "reason": str(r.get("reason") or "(no reason recorded)"),
            }
            for _, r in bad.iterrows()
        ]
    )


def workload_table(summary: pd.DataFrame) -> pd.DataFrame:
    """Per workload: parameters, gradient bytes, FLOPs per sample, model intensity (FLOPs per byte communicated),
    computed per worker here (the summary's intensity column uses the global batch, so it grows with N)."""
    s = measured(summary)
    s = s[(s["status"] == "ok") & (s["scheme"] != "local")] if not s.empty else s
    rows = []
    for wl, d in s.groupby("workload"):
        r = d.iloc[0]
        comm = d["comm_bytes_per_iter"].max() if "comm_bytes_per_iter" in d else None
        rows.append(
            {
                "workload": wl,
                "unit": r.get("sample_unit"),
                "batch per worker": _f(r.get("batch_per_worker"), ".0f"),
                "seq len": _f(r.get("seq_len"), ".0f"),
                "params (M)": _f(r.get("params"), ".2f", 1e-6),
                "gradients (MB)": _f(r.get("grad_bytes"), ".1f", 1e-6),
                "GFLOP per sample": _f(r.get("flops_per_sample"), ".2f", 1e-9),
                "comm. per iteration per worker (MB)": _f(comm, ".1f", 1e-6),
                # per worker: FLOPs of its own batch over the bytes it communicates
                "intensity (FLOP/byte)": _f(
                    r.get("flops_per_sample") * r.get("batch_per_worker") / comm if comm else None, ".0f"
                ),
            }
        )
    return pd.DataFrame(rows)


ENV_FIELDS = [
    "run_id",
    "created_utc",
    "fingerprint",
    "git_commit",
    "python",
    "torch",
    "transformers",
    "cuda",
    "nccl",
    "device",
    "device_name",
    "device_count",
    "cpu_model",
    "cpu_count",
    "hosts",
    "interfaces",
    "slurm_job_id",
    "slurm_nodelist",
    "command",
]
"""The environment table's rows, in order; each run's backend library columns (`libraries`) follow nccl."""


def environment_table(env: pd.DataFrame, summary: pd.DataFrame | None = None) -> pd.DataFrame:
    """Fields as rows, one column per run (versions, devices, hosts, fingerprint); with the runs' summary,
    a `dist_backend` row: what moved the workers' tensors in that run's measured cells (a CUDA cell over
    gloo is 10-100x off, so the page says which it was)."""
    # where the package sat on the measuring machine is recorded in environment.parquet, not shown: a
    # report is committed and shared, and a machine path says nothing about the numbers
    libs = sorted({c for _, r in env.iterrows() for c in library_columns(r)} & set(env.columns))
    order = ENV_FIELDS[: ENV_FIELDS.index("nccl") + 1] + libs + ENV_FIELDS[ENV_FIELDS.index("nccl") + 1 :]
    extra = [
        c for c in env.columns if c not in order and c not in ("schema_version", "run", "package_path", "libraries")
    ]
    fields = [f for f in order if f in env] + extra
    out = {"field": ["machine", *fields]}
    for i, (_, r) in enumerate(env.iterrows()):
        name = str(r.get("run", r.get("run_id", i)))
        out[name] = [verdict(r)] + [("" if pd.isna(r.get(f)) else str(r.get(f))) or "-" for f in fields]
    if summary is not None and "dist_backend" in summary and "run_id" in env:
        out["field"].append("dist_backend")
        for i, (_, r) in enumerate(env.iterrows()):
            name = str(r.get("run", r.get("run_id", i)))
            ok = summary[(summary["run_id"] == r["run_id"]) & (summary["status"] == "ok")]
            used = sorted({str(b) for b in ok["dist_backend"].dropna()} - {""})
            out[name].append(", ".join(used) or "-")
    return pd.DataFrame(out)


def fits_table(fits: pd.DataFrame) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "collective": r["collective"],
                "backend": r["backend"],
                "N": int(r["workers"]),
                "network": r["network"],
                "sizes": int(r["sizes"]),
                "alpha (µs)": _f(r["alpha_s"], ".1f", 1e6),
                "beta (ns/byte)": _f(r["beta_s_per_byte"], ".3f", 1e9),
                "1/beta (Gbit/s)": _f(r["inv_beta_gbit_s"], ".2f"),
                "fit": r.get("fit", ""),
            }
            for _, r in fits.iterrows()
        ]
    )


def prediction_table(errs: pd.DataFrame) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "workload": r["workload"],
                "scheme": r["series"],
                "N": int(r["workers"]),
                "network": r["network"],
                "measured X median (/s)": _f(r["measured_x"], ".1f"),
                "predicted X (/s)": _f(r["predicted_x"], ".1f"),
                "error (%)": _f(r["error_pct"], "+.1f"),
            }
            for _, r in errs.iterrows()
        ]
    )


def sanity_checks(summary: pd.DataFrame, cv_limit: float = 0.10) -> list[str]:
    """Plain-language warnings about numbers that cannot be right or should not be trusted."""
    s = measured(summary)
    if s.empty:
        return []
    s = s[s["status"] == "ok"]
    out = []
    eff = s["scaling_efficiency"] if "scaling_efficiency" in s else pd.Series(dtype=float)
    hi = s[(eff > 1.05) & (s["scheme"] != "local")]
    if len(hi):
        cells = ", ".join(
            f"{r['workload']} {r['scheme']} N={int(r['workers'])} ({r['scaling_efficiency']:.2f})"
            for _, r in hi.iterrows()
        )
        out.append(
            f"{len(hi)} cell(s) scale better than ideal (efficiency > 1.05): {cells}. Communication "
            f"cannot make a cell faster than the 1-worker no-communication baseline, so the baseline "
            f"or these cells were disturbed (other load, frequency scaling); treat their efficiencies "
            f"as noise"
        )
    if "iter_s_cv" in s:
        noisy = s[s["iter_s_cv"] > cv_limit]
        if len(noisy):
            out.append(
                f"{len(noisy)} of {len(s)} cells have an iteration-time CV above {cv_limit:.0%} "
                f"(median CV {s['iter_s_cv'].median():.0%}): differences smaller than that are not "
                f"resolved by these runs"
            )
    if len(s):
        bound = s[[bool(row_host_bound(r)) for _, r in s.iterrows()]]
        if len(bound):
            cells = ", ".join(f"{r['workload']} {r['scheme']} N={int(r['workers'])}" for _, r in bound.iterrows())
            out.append(f"{len(bound)} GPU cell(s) are host-bound ({cells}): {HOST_WHY}")
    if {"exposed_comm_s", "comm_only_s"} <= set(s.columns):
        multi = s[(s["workers"] > 1) & (s["comm_only_s"] > 0)]
        over = multi[multi["exposed_comm_s"] > 2 * multi["comm_only_s"]]
        if len(multi) and len(over) > len(multi) / 2:
            out.append(
                f"in {len(over)} of {len(multi)} multi-worker cells the exposed time (iteration - "
                f"1-worker iteration) is more than twice the time to synchronise all gradients with "
                f"nothing overlapped: the slowdown is mostly not communication (ranks sharing cores, "
                f"other load), and overlap ratios clip to 0"
            )
    return out
