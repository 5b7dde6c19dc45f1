"""ddlbench's own stacks calibrated on the emulated testbed and checked on a host count held back
(experiments/own_calibration/run.py has the commands; docs/ARCHITECTURE.md, "Calibration"): fitted to the one-host
and two-host runs (harness/predict/own_calibration.py), every cell of the held-back runs predicted and compared,
beside the uncalibrated predictor fed from commbench at the held-back scale
(experiments/testbed_validation/validation.py), in the same three compute variants."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from experiments.testbed_validation.validation import (
    HOST_SHARE,
    SHARED,
    VARIANTS,
    _profiles,
    cell_compute,
    predict_runs,
    run_cores,
    summary_lines,
)
from harness.core.atomic import write_parquet_atomic
from harness.predict.own_calibration import METHODS, OwnCalibration, Runs, calibrate_own, read_runs
from harness.predict.predictor import predict_rows
from harness.report.validation import KEYS, format_validation, validate
from harness.results.store import load_run

ALL_VARIANTS = (*VARIANTS, SHARED)
"""The compute variants the calibration is checked in: the uncalibrated validation's three and processor sharing;
runs on hosts with a processor share of their own add HOST_SHARE (`variants`)."""


def variants(runs) -> tuple[str, ...]:
    """The compute variants for the runs (own_calibration.Runs): ALL_VARIANTS, and HOST_SHARE where every host had a
    processor share of its own."""
    shares = [g.host_cpus for g in runs.groups.values()]
    return (*ALL_VARIANTS, HOST_SHARE) if shares and all(shares) else ALL_VARIANTS


def variant_compute(variant: str, prof: dict):
    """compute(workload, group, local_s) of one compute variant for a group of the calibration's runs: the testbed
    validation's (experiments/testbed_validation/validation.cell_compute: `alone`, `contended`, `run-scaled`,
    `shared`) at the group's layout."""

    def compute(workload: str, g, local_s: float):
        cores = None if g.host_cpus else run_cores(g.run)
        return cell_compute(
            variant, prof, workload, g.batch, local_s, g.nodes * g.per_node, g.per_node, g.host_cpus or None, cores
        )

    return compute


def read_held(held) -> tuple[Runs, dict]:
    """The held-back runs, read once: their cells (own_calibration.read_runs) and each run's summary (a run
    directory's, or the table itself where a source is one: rounds pooled, harness/predict/rounds.py)."""
    runs = read_runs(held)
    tables = {str(s.attrs.get("name")): s for s in held if isinstance(s, pd.DataFrame)}
    return runs, {g.run: tables[g.run] if g.run in tables else load_run(g.run).summary for g in runs.groups.values()}


def predict_held(cal: OwnCalibration, held: tuple[Runs, dict], compute) -> pd.DataFrame:
    """Every method cell of the held-back runs (`read_held`) predicted by the calibration (each network's fitted
    link, each method's fitted stack, the cell's own layout), validated against its measurement."""
    runs, summaries = held
    parts = []
    for gk, g in runs.groups.items():
        measured = summaries[g.run]
        net = cal.network(g.network)
        for workload, cells in runs.cells[runs.cells["group"] == gk].groupby("workload"):
            model = compute(workload, g, runs.local[(g.run, g.network, workload)])
            methods = [m for m in METHODS if m in set(cells["scheme"])]
            pred = predict_rows(
                [model],
                [net],
                [g.nodes],
                g.per_node,
                methods,
                servers=g.servers or 1,
                knobs=cal.knobs(methods, share=g.server_share()),
                run_id="calibrated",
                server_hosts=g.server_hosts,
            )
            s = measured[
                (measured["status"] == "ok")
                & (measured["workload"] == workload)
                & (measured["network"] == g.network)
                & measured["scheme"].isin(methods)
            ]
            for k in KEYS:
                if k in pred and k in s and pd.api.types.is_numeric_dtype(s[k]):
                    pred[k] = pd.to_numeric(pred[k])
            v = validate(pred, s, KEYS)
            v["hosts"], v["workers_per_host"], v["rate_mbit"] = g.nodes, g.per_node, g.rate_mbit
            parts.append(v)
    t = pd.concat(parts, ignore_index=True)
    t.attrs["median_ape_pct"] = float(t["ape_pct"].median())
    t.attrs["inside_pct"] = float(100 * t["inside"].mean()) if "inside" in t else float("nan")
    return t


def intervals(
    cal: OwnCalibration, held: tuple[Runs, dict], compute, t: pd.DataFrame, samples: int = 32
) -> pd.DataFrame:
    """`t` with each cell's 10th-90th percentile prediction over the fit's uncertainty (bootstrap draws of the
    parameters) widened by what the fit still misses per method (its leave-one-workload-out errors), and whether
    the measurement falls inside."""
    miss = cal.discrepancy()
    draws = cal.draws(samples, seed=0)
    runs = held[0]
    lows, highs = {}, {}
    for gk, g in runs.groups.items():
        for workload, cells in runs.cells[runs.cells["group"] == gk].groupby("workload"):
            model = compute(workload, g, runs.local[(g.run, g.network, workload)])
            methods = [m for m in METHODS if m in set(cells["scheme"])]
            samples_s = {m: [] for m in methods}
            for i, d in enumerate(draws):
                pred = predict_rows(
                    [model],
                    [cal.network(g.network, d)],
                    [g.nodes],
                    g.per_node,
                    methods,
                    servers=g.servers or 1,
                    knobs=cal.knobs(methods, d, share=g.server_share()),
                    server_hosts=g.server_hosts,
                )
                for m, x in zip(pred["scheme"], pred["iter_s_median"]):
                    # r = log(predicted / measured throughput) of a held-out cell: the iteration it stands for
                    # is the predicted one times e^r
                    r = miss.get(m, np.zeros(1))
                    samples_s[m].append(x * float(np.exp(r[i % len(r)])))
            for m, xs in samples_s.items():
                lows[(workload, g.network, g.nodes, m)] = float(np.quantile(xs, 0.1))
                highs[(workload, g.network, g.nodes, m)] = float(np.quantile(xs, 0.9))
    key = list(zip(t["workload"], t["network"], t["hosts"], t["scheme"]))
    t = t.copy()
    t["pred_low_s"] = [lows.get(k, np.nan) for k in key]
    t["pred_high_s"] = [highs.get(k, np.nan) for k in key]
    t["inside"] = (t["measured_iter_s"] >= t["pred_low_s"]) & (t["measured_iter_s"] <= t["pred_high_s"])
    t["width_pct"] = 100 * (t["pred_high_s"] - t["pred_low_s"]) / t["predicted_iter_s"]
    t.attrs.update(median_ape_pct=float(t["ape_pct"].median()), inside_pct=float(100 * t["inside"].mean()))
    return t


def run(fit_runs, held, profiles, commbench, out: Path, samples: int = 32, lowo: bool = True, spread=None) -> dict:
    """Calibrate per compute variant, predict the held-back runs, write the report's tables; returns
    {variant: (calibration, calibrated table, uncalibrated table or None)}. `spread`: how far the rounds of each
    sweep lie apart (rounds.round_spread), reported first where given."""
    out.mkdir(parents=True, exist_ok=True)
    prof = _profiles(profiles)
    held_runs = read_held(held)
    checked = variants(held_runs[0])
    before = predict_runs(held, commbench, profiles, variants=checked) if commbench else {}
    results, text = {}, []
    if spread is not None and len(spread):
        write_parquet_atomic(spread, out / "rounds.parquet")
        text += [*spread_lines(spread), ""]
    for variant in checked:
        compute = variant_compute(variant, prof)
        cal = calibrate_own(fit_runs, compute, lowo=lowo)
        if not cal.fit.converged:  # reported, not hidden: `predict --calibrate` refuses such a fit (require_converged)
            text += [f"**compute {variant}: the fit did not converge** ({cal.fit.message})", ""]
        t = intervals(cal, held_runs, compute, predict_held(cal, held_runs, compute), samples)
        params = cal.table()
        write_parquet_atomic(t, out / f"validation-{variant}.parquet")
        write_parquet_atomic(params.assign(cells=params["cells"].astype(str)), out / f"params-{variant}.parquet")
        write_parquet_atomic(cal.cells, out / f"fitted-{variant}.parquet")
        if cal.lowo is not None:
            write_parquet_atomic(cal.lowo, out / f"lowo-{variant}.parquet")
        b = before.get(variant)
        results[variant] = (cal, t, b)
        text += [
            f"## compute {variant}: calibrated median APE {t.attrs['median_ape_pct']:.1f} % over {len(t)} cells"
            + (f" (uncalibrated {b.attrs['median_ape_pct']:.1f} %)" if b is not None else "")
            + f", {t.attrs['inside_pct']:.0f} % inside their intervals",
            "",
            *param_lines(params),
            "",
            *held_lines(t),
            "",
            *summary_lines(t),
            "",
            format_validation(t),
            "",
        ]
        text += [*ranking_lines(t, b), ""]
        if cal.lowo is not None:
            lo = cal.lowo.assign(abs_pct=100 * cal.lowo["error"].abs())
            text += [
                f"leave-one-workload-out (throughput): median {lo['abs_pct'].median():.1f} %, "
                f"largest {lo['abs_pct'].max():.1f} % over {len(lo)} cells",
                "",
            ]
    (out / "validation.md").write_text("\n".join(text) + "\n")
    return results


def spread_lines(spread: pd.DataFrame) -> list[str]:
    """Per host count: how far the same cell's rounds lie apart (percent of their mean), the floor under any
    prediction's error on this machine."""
    lines = [
        "## The same cells in interleaved rounds: how far apart (the machine's drift)",
        "",
        "| hosts | cells | rounds | median spread between rounds, % | 90th percentile | largest |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    for h, g in spread.groupby("hosts"):
        x = g["spread_pct"]
        lines.append(
            f"| {h} | {len(g)} | {int(g['rounds'].max())} | {x.median():.1f} | {x.quantile(0.9):.1f} | {x.max():.1f} |"
        )
    return lines


def held_lines(t: pd.DataFrame) -> list[str]:
    """Per held-back host count: the cells' median absolute error, how many fall inside their intervals and the
    intervals' median width (percent of the prediction): the three figures a choice between methods rests on."""
    lines = [
        "| hosts | cells | median APE % | inside their interval | median interval width, % of prediction |",
        "|---:|---:|---:|---:|---:|",
    ]
    for h, g in t.groupby("hosts"):
        lines.append(
            f"| {h} | {len(g)} | {g['ape_pct'].median():.1f} | {100 * g['inside'].mean():.0f} % "
            f"| {g['width_pct'].median():.1f} |"
        )
    return lines


def param_lines(params: pd.DataFrame) -> list[str]:
    lines = [
        "| parameter | value | interval (10-90 %) | sourced | determined |",
        "|---|---:|---:|---:|---|",
    ]
    for r in params.itertuples():
        lines.append(
            f"| {r.parameter} | {r.value:.4g} {r.unit} | [{r.low:.4g}, {r.high:.4g}] | "
            f"{r.sourced_value:.4g} [{r.sourced_low:.4g}, {r.sourced_high:.4g}] | {'yes' if r.determined else 'no'} |"
        )
    return lines


def ranking(t: pd.DataFrame, b: pd.DataFrame | None) -> pd.DataFrame:
    """Per (workload, network): the method measured fastest, the one the calibrated model ranks first and the one
    the uncalibrated model ranks first (what `ddlbench advise` measures first), with the measured cost of each
    pick over the fastest."""
    rows = []
    for (hosts, w, net), g in t.groupby(["hosts", "workload", "network"]):
        meas = g.set_index("scheme")["measured_iter_s"]
        best = meas.idxmin()
        row = {"hosts": hosts, "workload": w, "network": net, "measured_best": best}
        picks = [("calibrated", g)]
        if b is not None:
            picks.append(("uncalibrated", b[(b["hosts"] == hosts) & (b["workload"] == w) & (b["network"] == net)]))
        for name, frame in picks:
            if frame.empty:
                continue
            pick = frame.set_index("scheme")["predicted_iter_s"].idxmin()
            order = list(frame.sort_values("predicted_iter_s")["scheme"])
            row[f"{name}_pick"] = pick
            row[f"{name}_pick_slower_pct"] = 100 * (meas[pick] / meas[best] - 1)
            row[f"{name}_rank_of_best"] = order.index(best) + 1 if best in order else math.nan
        rows.append(row)
    return pd.DataFrame(rows)


def ranking_lines(t: pd.DataFrame, b: pd.DataFrame | None) -> list[str]:
    r = ranking(t, b)
    lines = [
        "| hosts | workload | network | measured fastest | calibrated first (measured slower by, fastest's rank) "
        "| uncalibrated first (measured slower by, fastest's rank) |",
        "|---:|---|---|---|---|---|",
    ]
    for x in r.itertuples():
        cal = f"{x.calibrated_pick} (+{x.calibrated_pick_slower_pct:.1f} %, #{x.calibrated_rank_of_best})"
        unc = (
            f"{x.uncalibrated_pick} (+{x.uncalibrated_pick_slower_pct:.1f} %, #{x.uncalibrated_rank_of_best})"
            if hasattr(x, "uncalibrated_pick") and isinstance(x.uncalibrated_pick, str)
            else "-"
        )
        lines.append(f"| {x.hosts} | {x.workload} | {x.network} | {x.measured_best} | {cal} | {unc} |")
    return lines
