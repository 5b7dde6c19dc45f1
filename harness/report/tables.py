"""The report's tables (pure): tidy rows -> small DataFrames of formatted strings, headers with units."""

from __future__ import annotations

import math

import pandas as pd

from harness.report.data import measured, schemes
from harness.results.machine_load import verdict


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
    keys = [k for k in ("workload", "network", "_o", "backend", "workers", "cell_id") if k in s]
    return s.sort_values(keys).drop(columns="_o")


def _ci(r) -> str:
    if r["status"] != "ok":
        return "-"
    return f"{_f(r.get('throughput_ci95_low'), '.1f')} - {_f(r.get('throughput_ci95_high'), '.1f')}"


def summary_table(summary: pd.DataFrame) -> pd.DataFrame:
    """One line per measured cell: median X, 95% CI of the mean, spread, scaling, exposed comm."""
    s = _sorted(measured(summary))
    several_nets = s["network"].nunique() > 1 if "network" in s else False
    rows = []
    for _, r in s.iterrows():
        row = {"workload": r["workload"], "scheme": r["scheme"], "backend": r.get("backend"),
               "N": int(r["workers"])}
        if several_nets:
            row["network"] = r.get("network")
        if r.get("servers") and not pd.isna(r.get("servers")) and int(r["servers"]):
            row["scheme"] = f"{r['scheme']} (S={int(r['servers'])})"
        row.update({
            "status": r["status"],
            "X median (/s)": _f(r.get("throughput_median"), ".1f"),
            "X mean 95% CI (/s)": _ci(r),
            "iter median (ms)": _f(r.get("iter_s_median"), ".1f", 1e3),
            "iter IQR (ms)": _f(r.get("iter_s_iqr"), ".1f", 1e3),
            "CV": _f(r.get("iter_s_cv"), ".3f"),
            "n": _f(r.get("samples"), ".0f"),
            "speed-up": _f(r.get("speedup"), ".2f"),
            "efficiency": _f(r.get("scaling_efficiency"), ".2f"),
            "exposed comm (ms)": _f(r.get("exposed_comm_s"), ".1f", 1e3),
            "overlap": _f(r.get("overlap_ratio"), ".2f"),
            "straggler rank": _f(r.get("straggler_rank"), ".0f"),
        })
        rows.append(row)
    return pd.DataFrame(rows)


def failed_table(bad: pd.DataFrame) -> pd.DataFrame:
    return pd.DataFrame([{"cell": r["cell_id"], "run": r.get("run", ""), "status": r["status"],
                          "reason": str(r.get("reason") or "(no reason recorded)")}
                         for _, r in bad.iterrows()])


def workload_table(summary: pd.DataFrame) -> pd.DataFrame:
    """Per workload: parameters, gradient bytes, FLOPs per sample, model intensity (FLOPs per byte communicated),
    computed per worker here (the summary's intensity column uses the global batch, so it grows with N)."""
    s = measured(summary)
    s = s[(s["status"] == "ok") & (s["scheme"] != "local")] if not s.empty else s
    rows = []
    for wl, d in s.groupby("workload"):
        r = d.iloc[0]
        comm = d["comm_bytes_per_iter"].max() if "comm_bytes_per_iter" in d else None
        rows.append({"workload": wl, "unit": r.get("sample_unit"),
                     "batch per worker": _f(r.get("batch_per_worker"), ".0f"),
                     "seq len": _f(r.get("seq_len"), ".0f"),
                     "params (M)": _f(r.get("params"), ".2f", 1e-6),
                     "gradients (MB)": _f(r.get("grad_bytes"), ".1f", 1e-6),
                     "GFLOP per sample": _f(r.get("flops_per_sample"), ".2f", 1e-9),
                     "comm. per iteration per worker (MB)": _f(comm, ".1f", 1e-6),
                     # per worker: FLOPs of its own batch over the bytes it communicates
                     "intensity (FLOP/byte)": _f(r.get("flops_per_sample") * r.get("batch_per_worker") / comm
                                                 if comm else None, ".0f")})
    return pd.DataFrame(rows)


ENV_FIELDS = ["run_id", "created_utc", "fingerprint", "git_commit", "python", "torch", "transformers",
              "cuda", "nccl", "horovod", "deepspeed", "byteps", "device", "device_name", "device_count",
              "cpu_model", "cpu_count", "hosts", "interfaces", "slurm_job_id", "slurm_nodelist", "command"]


def environment_table(env: pd.DataFrame) -> pd.DataFrame:
    """Fields as rows, one column per run (versions, devices, hosts, fingerprint)."""
    extra = [c for c in env.columns if c not in ENV_FIELDS and c not in ("schema_version", "run")]
    fields = [f for f in ENV_FIELDS if f in env] + extra
    out = {"field": ["machine"] + fields}
    for i, (_, r) in enumerate(env.iterrows()):
        name = str(r.get("run", r.get("run_id", i)))
        out[name] = [verdict(r)] + [("" if pd.isna(r.get(f)) else str(r.get(f))) or "-" for f in fields]
    return pd.DataFrame(out)


def fits_table(fits: pd.DataFrame) -> pd.DataFrame:
    return pd.DataFrame([{"collective": r["collective"], "backend": r["backend"], "N": int(r["workers"]),
                          "network": r["network"], "sizes": int(r["sizes"]),
                          "alpha (µs)": _f(r["alpha_s"], ".1f", 1e6),
                          "beta (ns/byte)": _f(r["beta_s_per_byte"], ".3f", 1e9),
                          "1/beta (Gbit/s)": _f(r["inv_beta_gbit_s"], ".2f"), "fit": r.get("fit", "")}
                         for _, r in fits.iterrows()])


def prediction_table(errs: pd.DataFrame) -> pd.DataFrame:
    return pd.DataFrame([{"workload": r["workload"], "scheme": r["series"], "N": int(r["workers"]),
                          "network": r["network"], "measured X median (/s)": _f(r["measured_x"], ".1f"),
                          "predicted X (/s)": _f(r["predicted_x"], ".1f"),
                          "error (%)": _f(r["error_pct"], "+.1f")} for _, r in errs.iterrows()])


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
        cells = ", ".join(f"{r['workload']} {r['scheme']} N={int(r['workers'])} ({r['scaling_efficiency']:.2f})"
                          for _, r in hi.iterrows())
        out.append(f"{len(hi)} cell(s) scale better than ideal (efficiency > 1.05): {cells}. Communication "
                   f"cannot make a cell faster than the 1-worker no-communication baseline, so the baseline "
                   f"or these cells were disturbed (other load, frequency scaling); treat their efficiencies "
                   f"as noise")
    if "iter_s_cv" in s:
        noisy = s[s["iter_s_cv"] > cv_limit]
        if len(noisy):
            out.append(f"{len(noisy)} of {len(s)} cells have an iteration-time CV above {cv_limit:.0%} "
                       f"(median CV {s['iter_s_cv'].median():.0%}): differences smaller than that are not "
                       f"resolved by these runs")
    if {"exposed_comm_s", "comm_only_s"} <= set(s.columns):
        multi = s[(s["workers"] > 1) & (s["comm_only_s"] > 0)]
        over = multi[multi["exposed_comm_s"] > 2 * multi["comm_only_s"]]
        if len(multi) and len(over) > len(multi) / 2:
            out.append(f"in {len(over)} of {len(multi)} multi-worker cells the exposed time (iteration - "
                       f"1-worker iteration) is more than twice the time to synchronise all gradients with "
                       f"nothing overlapped: the slowdown is mostly not communication (ranks sharing cores, "
                       f"other load), and overlap ratios clip to 0")
    return out
