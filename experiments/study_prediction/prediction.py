"""The study's prediction report, the logic behind experiments/study_prediction/run.py (docs/ARCHITECTURE.md, "The
study's wing"): the whole scaling curve, its calibration from one node, intervals, mechanisms and the report's
tables and figures written into one folder.

The study's whole scaling curve, predicted: ResNet-50 / BERT-Base / BERT-Large x the seven methods (plus DDP
and Horovod) x its three networks x 4, 8, 16 and 32 GPUs (1, 2, 4, 8 nodes of 4 GeForce GPUs; one dedicated
server host per worker node), on the study's cluster as harness/study/cluster.py builds it from the
inputs of harness/study/inputs.py (each with its range and source). Every cell carries an interval
(`pred_low`, `pred_high`: the 10th and 90th percentiles of the same simulation on Latin-hypercube samples of the
inputs' ranges); a sensitivity table says which input moves which cells by how much (the study: Shi et al.,
IEEE Network 2021).

    python -m experiments.study_prediction.run --profiles reports/study-prediction/profiles \
        --calibrate harness/study/one_node.csv --out DIR

With `--calibrate TABLE` (the study's one-node column, or a user's table or run directory of the same shape) a
few named parameters of the stacks are fitted to the one-node cells first (harness/study/calibration.py:
values, intervals, leave-one-workload-out) and every size is predicted from the calibrated inputs, the fit's
uncertainty in the intervals beside the other inputs' ranges; the uncalibrated curve is written beside it
(uncalibrated.parquet) for comparison. Without it, the inputs as sourced (issue 38's model).

DIR gets predictions.parquet (both compute sources, all sizes, with the intervals), curves-<workload>.png
(throughput) and efficiency-<workload>.png with bands, table-<N>gpus.md, findings.md, sensitivity.md and
.parquet, inputs.md, and report.md tying them together. `--profiles` holds `profile-<workload>.parquet` from
`ddlbench profile` (any batch: per-layer times are scaled so that one GPU runs the study's batch at its
single-GPU throughput); without it, or for a workload without one, FLOP counts on the study-gpu roofline. Both
compute sources are predicted; the figures and tables use the profile's.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import pandas as pd
from rich.progress import Progress

from experiments.study_prediction.calibration_tables import (
    cells_table,
    comparison_table,
    error_grid,
    lowo_table,
    outside_lines,
    params_table,
    two_node_cells_table,
)
from experiments.study_prediction.curve_report import (
    best_methods,
    best_table,
    curve_figure,
    findings,
    inputs_table,
    interval_summary,
    sensitivity_table,
    size_table,
)
from experiments.study_prediction.mechanisms import (
    gil_lines,
    mechanism_changes,
    mechanism_table,
    startup_table,
    van_lines,
    width_table,
)
from experiments.study_prediction.published import published_check, published_table_md
from harness.core.atomic import write_parquet_atomic
from harness.core.errors import UserError
from harness.predict.fitting import MAX_MISFIT
from harness.predict.predictor import SEVEN_METHODS
from harness.report.prediction import save
from harness.study.calibration import calibrate, lowo_summary, read_one_node
from harness.study.cluster import FAMILIES, GPUS_PER_NODE, check_size, startup_rows
from harness.study.curve import (
    EXTRA,
    SAMPLES,
    WORKLOADS,
    compute_models,
    mechanism_effects,
    predict_curve,
    sensitivity,
    with_intervals,
)
from harness.study.inputs import INPUTS
from harness.study.two_node import calibrate_two_node, coverage
from harness.study.two_node import lowo_table as two_node_lowo

METHODS = list(SEVEN_METHODS) + list(EXTRA)
COMMAND = "python -m experiments.study_prediction.run"
"""How the report is run (its `--help` and the command report.md names), from the repository's root."""


def main(argv=None) -> int:
    try:
        a, nodes = _arguments(argv)
        a.out.mkdir(parents=True, exist_ok=True)
        t0, c0 = time.perf_counter(), time.process_time()
        with Progress(transient=True) as bar:
            one, cal = _calibrations(a, bar)
            if cal is not None and not cal.fit.converged:
                print(
                    f"error: the calibration from {a.calibrate} {a.two_node or ''} did not converge "
                    f"({cal.fit.message}); nothing predicted from it",
                    file=sys.stderr,
                )
                return 1
            got = _curves(a, nodes, one, cal, bar)
    except UserError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    _write(a, got, one, cal, time.perf_counter() - t0, time.process_time() - c0)
    return 0


def _arguments(argv) -> tuple[argparse.Namespace, tuple[int, ...]]:
    ap = argparse.ArgumentParser(prog=COMMAND)
    ap.add_argument("--profiles", type=Path, help="directory with profile-<workload>.parquet")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--samples", type=int, default=SAMPLES, help="input samples behind each interval")
    ap.add_argument(
        "--flops-samples",
        type=int,
        default=0,
        help="also predict with the per-layer split from FLOP counts, with this many samples behind its "
        "intervals (a second opinion on the compute split; 0: not predicted)",
    )
    ap.add_argument("--microbench", type=Path, help="directory with gil-handoff.json and zmq-van.json (default: --out)")
    ap.add_argument(
        "--sensitivity",
        action="store_true",
        help="also run the one-at-a-time sensitivity corners (two curves per uncertain input: minutes)",
    )
    ap.add_argument(
        "--calibrate",
        type=Path,
        help="one-node table (CSV/Parquet with the study's columns) or run directory to calibrate from",
    )
    ap.add_argument(
        "--two-node",
        type=Path,
        help="two-node table (gpus 8, every method on every network) or run directory: the transports are "
        "fitted from it on top of --calibrate's one-node fit (harness/study/two_node.py)",
    )
    ap.add_argument("--nodes", default="1,2,4,8,16", help="node counts of the curve (4 GPUs each; up to 16)")
    ap.add_argument("--no-lowo", action="store_true", help="skip the leave-one-workload-out check of the calibration")
    a = ap.parse_args(argv)
    if a.two_node is not None and a.calibrate is None:
        raise UserError("--two-node fits the transports on top of a one-node fit: give --calibrate ONE-NODE-TABLE too")
    try:
        nodes = tuple(int(x) for x in a.nodes.split(","))
    except ValueError:
        raise UserError(f"--nodes {a.nodes}: give node counts like 1,2,4,8,16") from None
    for n in nodes:
        check_size(n)
    if a.profiles is not None and not a.profiles.is_dir():
        raise UserError(
            f"--profiles {a.profiles} is not a directory: give the directory holding "
            f"profile-<workload>.parquet (reports/study-prediction/profiles)"
        )
    if a.samples < 2 or a.flops_samples == 1 or a.flops_samples < 0:
        raise UserError(f"--samples {a.samples}: an interval needs at least 2 samples (the report uses {SAMPLES})")
    return a, nodes


def _calibrations(a, bar):
    """(the one-node calibration, the one everything is predicted from: the two-node one when --two-node), or
    (None, None) without --calibrate."""
    if not a.calibrate:
        return None, None
    task = bar.add_task("calibrating from one node", total=None)
    one = calibrate(a.calibrate, a.profiles, lowo=not a.no_lowo)
    if not (a.two_node and one.fit.converged):
        bar.remove_task(task)
        return one, one
    bar.update(task, description="calibrating the transports from two nodes")
    two = calibrate_two_node(one, read_one_node(a.calibrate), a.two_node, a.profiles, lowo=not a.no_lowo)
    bar.remove_task(task)
    return one, two


def _curves(a, nodes, one, cal, bar) -> dict:
    """The predicted curves: per compute source with intervals; beside the profile's, the mechanisms taken out,
    the uncalibrated and one-node-only curves and the sensitivity corners where asked."""
    got = {"frames": {}, "sens": None, "uncal": None, "one_only": None}
    computes = ("profile", "flops") if a.flops_samples else ("profile",)
    values = cal.values if cal else None
    task = bar.add_task("predicting the curve", total=len(computes) + 3 + a.sensitivity)
    for compute in computes:
        bar.update(task, description=f"predicting the curve ({compute})")
        models = compute_models(a.profiles if compute == "profile" else None, compute)
        n = a.samples if compute == "profile" else a.flops_samples
        got["frames"][compute] = with_intervals(
            models,
            compute,
            samples=n,
            values=values,
            node_counts=nodes,
            fitted=cal.draws(n) if cal else None,
            discrepancy=cal.discrepancy() if cal else None,
        )
        bar.advance(task)
        if compute != "profile":
            continue
        got["effects"] = mechanism_effects(models, compute, values=values)
        bar.advance(task)
        if cal:
            got["uncal"] = predict_curve(models, compute, node_counts=nodes)
        if one is not cal:
            got["one_only"] = predict_curve(models, compute, one.values, node_counts=nodes)
        bar.advance(task, 2)
        if a.sensitivity:
            got["sens"] = sensitivity(models, compute, values=values)
            bar.advance(task)
    return got


def _write(a, got: dict, one, cal, wall: float, cpu: float) -> None:
    """Every output of the report into --out."""
    frames, sens, effects, uncal, one_only = (got[k] for k in ("frames", "sens", "effects", "uncal", "one_only"))
    df = pd.concat(frames.values(), ignore_index=True)
    write_parquet_atomic(df, a.out / "predictions.parquet")
    prof = frames["profile"]
    for wl in WORKLOADS:
        save(curve_figure(prof, wl, METHODS, "throughput"), a.out / f"curves-{wl}.png")
        save(curve_figure(prof, wl, METHODS, "efficiency"), a.out / f"efficiency-{wl}.png")
    sizes = sorted(prof["workers"].unique())
    for n in sizes:
        (a.out / f"table-{n}gpus.md").write_text(size_table(prof, n, METHODS, list(SEVEN_METHODS)) + "\n")
    found = findings(prof, list(SEVEN_METHODS))
    (a.out / "findings.md").write_text("\n".join(f"- {f}" for f in found) + "\n")
    best = best_methods(prof, list(SEVEN_METHODS))
    write_parquet_atomic(best, a.out / "best-methods.parquet")
    (a.out / "inputs.md").write_text(inputs_table(INPUTS.table()) + "\n")
    if sens is not None:
        write_parquet_atomic(sens, a.out / "sensitivity.parquet")
        (a.out / "sensitivity.md").write_text(sensitivity_table(sens, top=len(sens)) + "\n")
    widths = interval_summary(prof)
    write_parquet_atomic(effects, a.out / "mechanisms.parquet")
    (a.out / "mechanisms.md").write_text(mechanism_table(effects) + "\n")
    if one:
        write_parquet_atomic(uncal, a.out / "uncalibrated.parquet")
        _write_fit(one.table(), one.cells, one.lowo, a.out, "calibration")
    if one is not cal:
        write_parquet_atomic(one_only, a.out / "one-node-only.parquet")
        _write_fit(cal.table()[lambda t: t["block"] != "one node"], cal.cells, cal.lowo, a.out, "two-node")
    # the outside check: published BytePS and ByteScheduler scaling, predicted by the same model (published.py)
    got["published"] = published_check(fitted=a.out / "two-node-params.parquet")
    write_parquet_atomic(got["published"], a.out / "published.parquet")
    (a.out / "published.md").write_text(published_table_md(got["published"]) + "\n")
    (a.out / "report.md").write_text(_readme(a, got, one, cal, found, widths, wall, cpu))
    print(
        f"{len(df)} predictions ({len(prof)} per compute source, {a.samples} samples each) in {wall:.0f} s "
        f"({cpu:.0f} s CPU in this process); intervals: median width {widths['median']:.0%}, "
        f"90th percentile {widths['p90']:.0%}"
    )
    print("\n".join(found))


def _write_fit(params: pd.DataFrame, cells: pd.DataFrame, lowo: pd.DataFrame | None, out: Path, name: str) -> None:
    """A fit's parameters, cells and leave-one-workload-out rows as Parquet (calibration-*.parquet, lowo.parquet for
    the one-node fit; two-node-*.parquet for the transports)."""
    write_parquet_atomic(
        params.assign(cells=params["cells"].map(lambda c: "; ".join(" ".join(k) for k in c))),
        out / f"{name}-params.parquet",
    )
    write_parquet_atomic(cells, out / f"{name}-cells.parquet")
    if lowo is not None:
        write_parquet_atomic(lowo, out / ("lowo.parquet" if name == "calibration" else f"{name}-lowo.parquet"))


def _microbench(folder: Path) -> dict:
    """The microbenchmarks' JSON, where they were written (scripts/reference/gil_handoff.py, zmq_van.py)."""
    out = {}
    for key, name in (("gil", "gil-handoff.json"), ("van", "zmq-van.json")):
        f = folder / name
        if f.exists():
            out[key] = json.loads(f.read_text())
    return out


def _calibration_lines(cal, uncal, prof) -> list[str]:
    table = cal.table()  # its draws and determining cells, computed once for both tables below
    share = "SGD" if cal.adam_share == 0 else "Adam"
    sel = ", ".join(f"{'SGD' if k == 0 else 'Adam'} {v:.0f}" for k, v in cal.selection.items())
    lines = [
        "## Calibrated from one node",
        "",
        f"The stacks' software costs below were fitted to the study's one-node column (`{cal.source}`: 1 GPU and "
        "4 GPUs in one node, every method under each network setting; harness/study/calibration.py, "
        'docs/ARCHITECTURE.md "Calibration"). Each parameter is a physical quantity of one stack shared by the '
        "three workloads (a workload enters only through its layer profile); no parameter per cell or per "
        "workload. Least squares on each cell's log-ratio over its uncertainty (its std over runs, at least 1%); "
        "three blocks fitted in turn, each to its own methods' cells (all-reduce, BytePS, ByteScheduler: the last "
        "after a Latin-hypercube scan, its cost being rugged); the host path is not searched (one node sees only "
        "min(edge, host path / 4)) and keeps what the cells allow of its sourced range. The interval is the 10th-90th "
        "percentile of a linearised wild bootstrap (each cell's residual, at least its own uncertainty, with a "
        "random sign, through the Jacobian); a parameter that no cell moves by a quarter of its uncertainty over "
        "its whole range is not determined and keeps the part of its sourced range the cells allow. "
        f"The single-GPU BERT figures are taken as run with {share} (all-reduce block's cost: {sel}). "
        f"{cal.fit.evaluations} simulations of the one-node cells; {cal.fit.message}.",
        "",
        params_table(table),
        "",
        "Fitted values outside their sourced ranges are findings, not errors to hide (hypotheses below; each "
        "would need a microbenchmark on the study's hardware to settle):",
        "",
        *[f"- {line}" for line in outside_lines(table)],
        "- BytePS's transports (TCP over 10 GbE and IPoIB, RDMA on IB): one node of BytePS runs no server, so the "
        "one-node PS cells do not cross the network (their three network columns agree within run-to-run noise), "
        "and the per-connection rates keep their sourced ranges.",
        "",
        "### The one-node cells, measured and fitted",
        "",
        cells_table(cal.cells),
        "",
    ]
    if cal.lowo is not None:
        lines += [
            "### Leave one workload out",
            "",
            "Fitted to two workloads' one-node cells, the third's predicted (median error of its cells per "
            "method; the three network columns of a cell count as three):",
            "",
            lowo_table(lowo_summary(cal.lowo)),
            "",
        ]
    lines += [
        "### Calibrated against uncalibrated",
        "",
        "The best of the study's seven per (workload, network) row, and each method's median change from the "
        "uncalibrated model (the inputs as sourced, issue 38; `uncalibrated.parquet`):",
        "",
        comparison_table(prof, uncal, list(SEVEN_METHODS)),
        "",
    ]
    return lines


def _far_misses(lowo: pd.DataFrame) -> list[str]:
    """The held-out cells a transport fit misses by more than a quarter: named, as findings."""
    far = lowo[lowo["error"].abs() > MAX_MISFIT]
    if far.empty:
        return []
    cells = "; ".join(f"{r.workload} {r.scheme} on {r.network} {r.error:+.0%}" for r in far.itertuples())
    return [
        f"Held out by more than {MAX_MISFIT:.0%}: {cells}. A fit to the other two workloads leaves BytePS's "
        "per-partition costs free enough to fail on the third; where that third has many small tensors (BERT-Large's "
        "WFBP sends each as its own partitions) the extrapolation is far off. Intervals draw each method's misses "
        "clipped to three robust sigmas of them (calibration.MISS_CLIP), so one such fold does not stretch them.",
        "",
    ]


def _two_node_lines(two, prof, one_only) -> list[str]:
    table = two.table()
    table = table[table["block"] != "one node"]
    cov = coverage(prof, two.cells, two.lowo)
    lines = [
        "## Calibrated from two nodes: the transports",
        "",
        f"On top of the one-node fit, the named parameters of each network's transports were fitted to the study's "
        f"two-node column (`{two.source}`: 8 GPUs on two nodes, every method on each network; "
        'harness/study/two_node.py, docs/ARCHITECTURE.md "Calibration"): NCCL\'s ring across nodes (its wire rate '
        "and per-message cost on each transport), BytePS's push and pull (ps-lite's RDMA van, "
        "the ZeroMQ van over TCP on 10 GbE and on IPoIB, one IPoIB stream), the node's host path, and the "
        "servers' summation and per-message and per-partition costs. Each is shared by the three workloads and by "
        "every method on that path; blocks in turn, on each network NCCL's ring (the all-reduce methods' cells) and "
        "then BytePS on it (the PS methods' cells), later blocks keeping the earlier ones' shared parameters, each "
        "after a Latin-hypercube scan (a rate binds only below its path's "
        "slowest other part). Overlapped backward now slows only the part of a collective on the GPU and its node's "
        "path, not the wire: the ring runs step by step at the slower of the two (`harness/sim/links.slower_of`). "
        f"{two.fit.evaluations} simulations of the two-node cells; {two.fit.message}.",
        "",
        params_table(table),
        "",
        "Fitted values outside their sourced ranges (findings, with the most likely reading):",
        "",
        *[f"- {line}" for line in outside_lines(table)],
        "",
        "### The two-node cells, measured and fitted",
        "",
        f"{len(two.skipped)} IPoIB cells of the PS methods equal their 10 GbE or IB cell within their spread where "
        "those two differ: most likely runs that did not go over IPoIB (the table's note says some did not). They "
        "are set aside, neither fitted nor counted in any error below.",
        "",
        two_node_cells_table(two.cells, two.skipped),
        "",
        f"Mean absolute error of the fitted cells: {two.cells['error'].abs().mean():.1%} "
        f"({', '.join(f'{n} {g.abs().mean():.1%}' for n, g in two.cells.groupby('network')['error'])}).",
        "",
    ]
    if two.lowo is not None:
        lines += [
            "### Leave one workload out on two nodes",
            "",
            "The transports fitted to two workloads' two-node cells, the third's predicted; median absolute "
            "error per method and network:",
            "",
            error_grid(two_node_lowo(two.lowo)),
            "",
            f"Over all held-out cells: median {two.lowo['error'].abs().median():.1%}, mean "
            f"{two.lowo['error'].abs().mean():.1%}, largest {two.lowo['error'].abs().max():.1%}.",
            "",
            *_far_misses(two.lowo),
        ]
    lines += [
        "### Intervals on the cells there are",
        "",
        "Each interval draws the fitted parameters from both fits' bootstraps, every other input from its "
        "range, and each method's own discrepancy (its leave-one-workload-out log-errors on two nodes, one "
        "drawn per sample), then takes the 10th-90th percentile, widened to hold the nominal prediction. "
        f"Inside it at 8 GPUs: {cov['fitted_inside']:.0%} of the {cov['fitted_cells']} fitted two-node cells"
        + (
            f"; {cov['held_inside']:.0%} of the {cov['held_cells']} held-out cells (their leave-one-workload-"
            "out prediction with the curve's relative interval around it)"
            if "held_inside" in cov
            else ""
        )
        + f"; median width {cov['median_width']:.0%} of the prediction at 8 GPUs.",
        "",
        "### Two nodes against one node only",
        "",
        "The best of the study's seven per (workload, network) row with the transports fitted from two nodes "
        "and with the one-node fit alone (`one-node-only.parquet`), and each method's median change:",
        "",
        comparison_table(prof, one_only, list(SEVEN_METHODS)),
        "",
    ]
    return lines


def _readme(a, got: dict, one, cal, found: list[str], widths: dict, wall: float, cpu: float) -> str:
    """report.md: what the study's curve is and how it was made, the calibrations where made (`one`, and `cal`
    when the transports were fitted on top of it), the findings, intervals, mechanisms, tables and what is not
    modelled; `got` is _curves's, `found` and `widths` the findings and interval widths written beside it."""
    prof = got["frames"]["profile"]
    sizes = sorted(prof["workers"].unique())
    lines = [
        *_header_lines(a, one, sizes, wall, cpu),
        *(_calibration_lines(one, got["uncal"], prof) if one else []),
        *(_two_node_lines(cal, prof, got["one_only"]) if cal is not None and cal is not one else []),
        *_findings_lines(prof, found, sizes),
        *_interval_lines(prof, widths, a.samples),
        *_mechanism_lines(got["effects"], startup_rows()),
        *_table_lines(prof, sizes, got["sens"]),
        *_microbench_lines(_microbench(a.microbench or a.out)),
        *_compute_lines(prof, got["frames"].get("flops")),
        *_published_lines(got.get("published")),
        *NOT_MODELLED,
    ]
    return "\n".join(lines)


def _published_lines(pub: pd.DataFrame | None) -> list[str]:
    """The outside check (published.py): published scaling of BytePS (OSDI'20) and ByteScheduler (SOSP'19) against
    the same model's prediction of their stated setups, each row's substitutions said."""
    if pub is None or not len(pub):
        return []
    return [
        "## Published scaling, predicted",
        "",
        "Scaling that BytePS (Jiang et al., OSDI 2020) and ByteScheduler (Peng et al., SOSP 2019) published at 8 to "
        "256 GPUs, each number with its source and how it was read (published_scaling.csv in "
        "experiments/study_prediction/; "
        "provenance in that folder's README), predicted by this model where the setup can be stated "
        "(published_setups.csv: what stands in for what). Efficiency in points; `compute x0.5 / x2` is the same "
        "prediction with one GPU's iteration halved and doubled; `fitted RDMA` uses this report's two-node fit of the "
        "study's RDMA transports instead of their sourced values. Not a fit: nothing here is tuned to these numbers.",
        "",
        published_table_md(pub),
        "",
    ]


def _header_lines(a, cal, sizes: list, wall: float, cpu: float) -> list[str]:
    """The title, the command and what the predictions rest on (`cal`: the one-node calibration, or None), the
    cluster and the methods as the study ran them."""
    used = (
        'the study\'s one-node column (4 GPUs, below) fixed the parameters of "Calibrated from one node"; none '
        "of its measured 8-32 GPU throughputs was used"
        if cal
        else "none of the study's measured multi-GPU throughputs was used"
    )
    cmd = (
        f"{COMMAND} --profiles {a.profiles or '(none)'}"
        + (f" --calibrate {a.calibrate}" if a.calibrate else "")
        + (f" --two-node {a.two_node}" if a.two_node else "")
        + f" --out {a.out}"
    )
    return [
        "# The study's scaling curve, predicted",
        "",
        f"Generated by `{cmd}` ({wall:.0f} s wall, {cpu:.0f} s CPU in the main process). Nothing here was measured "
        f"on GPUs or on InfiniBand, and {used}: these are predictions of ddlbench's discrete-event model "
        '(`harness/predict/`, `harness/sim/`; docs/ARCHITECTURE.md, "Predictor") of the study\'s cluster as '
        "`harness/study/cluster.py` builds it from the inputs in `inputs.md` (each with its range and "
        "source). `ddlbench predict --cluster study-ib-100g --intervals 32` runs the same model.",
        "",
        f"The cluster: {', '.join(str(n // GPUS_PER_NODE) for n in sizes)} nodes of {GPUS_PER_NODE} GeForce "
        f"RTX 2080 Ti ({', '.join(map(str, sizes))} GPUs), networks "
        f"{', '.join(FAMILIES)}; one dedicated parameter-server host per worker node (none at 4 GPUs: BytePS runs "
        "a one-node job without servers). Methods as the study ran them: BSP-A2A, WFBP-A2A and MG-WFBP on "
        "Horovod 0.19 with fusion, response cache and cycle time off (the study's own optimizer fuses), "
        "ByteScheduler-A2A on Horovod's defaults (5 ms cycle, 64 MiB fusion) with 4,000,000-parameter "
        "partitions and a 16,000,000-parameter credit, the PS methods on BytePS 0.2 (4,096,000-byte partitions, "
        "keys hashed to servers, worker-side scheduling off; ByteScheduler-PS reorders only the servers' "
        "summations, which the model does not distinguish: its rows equal WFBP-PS's). What those stacks paid "
        "beyond the wire, each from its code or a measurement (`inputs.md`): ByteScheduler's PyTorch plugin "
        "with rank 0 scheduling and the other ranks handing partitions over from hooks that wait for the GIL "
        "while a poller spins over Horovod handles (`harness/study/bytescheduler_plugin.py`, `gil.py`); each "
        "script's own optimizer (BERT: AdamW on Horovod, Adam under ByteScheduler, SGD on BytePS); NCCL's "
        "shared-memory kernels and BytePS's copies slowing backward and being slowed by it where they overlap "
        "(`interference.py`); BytePS's ZeroMQ van, one I/O thread per process, without RDMA; NCCL over IPoIB as "
        "one TCP stream per ring edge; Horovod's negotiation growing with the ring (linear Gatherv).",
        "",
    ]


def _findings_lines(prof: pd.DataFrame, found: list[str], sizes: list) -> list[str]:
    """The findings stated from the prediction, and the best method per size with the runner-up's interval."""
    return [
        "## Findings, stated from the prediction",
        "",
        *[f"- {f}" for f in found],
        "",
        "## The best method per size, with the runner-up's interval",
        "",
        *[
            line
            for n in sizes
            for line in (f"### {n} GPUs", "", best_table(best_methods(prof, list(SEVEN_METHODS)), n), "")
        ],
    ]


def _interval_lines(prof: pd.DataFrame, widths: dict, samples: int) -> list[str]:
    """What an interval is and how wide they are, per network and method."""
    return [
        "## Intervals",
        "",
        f"Each cell's `pred_low`-`pred_high` holds the 10th-90th percentiles of the prediction over {samples} "
        f"Latin-hypercube samples of every uncertain input inside its stated range (log-uniform where the range "
        f"spans more than 2x), widened to hold the nominal prediction. Width relative to the prediction: median "
        f"{widths['median']:.0%}, 90th percentile {widths['p90']:.0%}, widest {widths['max']:.0%} "
        f"({widths['widest']}), over {widths['cells']} cells. Median width per network and method:",
        "",
        width_table(prof, list(SEVEN_METHODS)),
        "",
    ]


def _mechanism_lines(effects: pd.DataFrame, startup: list[dict]) -> list[str]:
    """What each mechanism of the 2019 stacks does to the ranking, and the per-collective start-up at scale."""
    return [
        "## What each mechanism does to the ranking",
        "",
        "The 2019 stacks' own costs this model adds, each taken out alone (`MECHANISMS` in "
        "`harness/study/curve.py`: the IPoIB rates back to 25 and 20 Gbit/s, the rest to nothing) and the curve "
        "predicted again at nominal inputs; `mechanisms.parquet` holds every row. 'Gains' and 'loses' are the "
        "mean throughput change of a method over the size's 9 (workload, network) rows with the mechanism in; the "
        "last column the one cell it moves most.",
        "",
        mechanism_table(effects),
        "",
        *[f"- {line}" for line in mechanism_changes(effects)],
        "",
        "## Per-collective start-up at scale",
        "",
        "What one small all-reduce of a wait-free backprop costs in this model, against the all-reduce start-up "
        "the study's authors fitted on their own Horovod clusters (the intercept of their fit; their code then "
        "multiplies some entries by 3) and NCCL 2.4.8's own latency model (its algorithm choice, without launch "
        "or Horovod). Horovod's round grows with the ring through MPI_Gatherv, which Open MPI 4.0 runs linearly "
        "at rank 0.",
        "",
        startup_table(startup),
        "",
    ]


def _table_lines(prof: pd.DataFrame, sizes: list, sens: pd.DataFrame | None) -> list[str]:
    """The figures' names, a table per size and, where run, the sensitivity corners."""
    lines = [
        "## Figures",
        "",
        *[f"- `curves-{wl}.png`, `efficiency-{wl}.png`" for wl in WORKLOADS],
        "",
        "## Tables (compute from the profile; samples/s, the best of the study's seven in bold)",
        "",
    ]
    for n in sizes:
        lines += [f"### {n} GPUs", "", size_table(prof, n, METHODS, list(SEVEN_METHODS)), ""]
    if sens is not None:
        lines += [
            "## Sensitivity: each input alone at either end of its range (the 15 that move most cells; all in "
            "`sensitivity.md`)",
            "",
            sensitivity_table(sens),
            "",
        ]
    return lines


def _microbench_lines(bench: dict) -> list[str]:
    """The microbenchmarks behind the new inputs, where their JSON was found (_microbench)."""
    lines = []
    if bench:
        lines += ["## Microbenchmarks behind the new inputs (this machine)", ""]
        if "gil" in bench:
            lines += [
                f"`{bench['gil']['command']}` (`gil-handoff.json`):",
                "",
                *[f"- {x}" for x in gil_lines(bench["gil"])],
                "",
            ]
        if "van" in bench:
            lines += [
                f"`{bench['van']['command']}` (`zmq-van.json`):",
                "",
                *[f"- {x}" for x in van_lines(bench["van"])],
                "",
            ]
    return lines


def _compute_lines(prof: pd.DataFrame, flops: pd.DataFrame | None) -> list[str]:
    """How compute was made, and how far the curve from FLOP counts is from the profile's where predicted."""
    if flops is not None:
        both = prof.merge(flops, on=["workload", "network", "workers", "scheme"], suffixes=("", "_f"))
        d = (both["throughput_median_f"] / both["throughput_median"] - 1).abs()
    return [
        "## Compute",
        "",
        "`ddlbench profile` of the full models on a CPU (`profiles/`), every per-layer time scaled by one factor "
        "so that one GPU runs the study's batch at the study's single-GPU throughput (ResNet-50 253.1 img/s at "
        "batch 64, BERT-Base 212.8 and BERT-Large 49 seq/s at batch 64 and 8, sequence 64; device preset "
        "`study-gpu`)."
        + (
            " The same curve with the per-layer split from FLOP counts (`compute_source` = flops in "
            f"predictions.parquet) differs by {d.median():.1%} in median and {d.max():.0%} at most."
            if flops is not None
            else " (`--flops-samples N` adds the curve with the per-layer split "
            "from FLOP counts, a second opinion on the compute split.)"
        ),
        "",
    ]


NOT_MODELLED = [
    "## Not modelled (read the predictions with these in mind)",
    "",
    "- The servers' summation order under ByteScheduler-PS (`BYTEPS_SERVER_ENABLE_SCHEDULE=1`).",
    "- NCCL's protocol choice (LL/LL128/Simple) beyond a ring for large and a tree for small messages.",
    "- Rank 0's own GIL under ByteScheduler (its queue holds ready events polled through ctypes, which give "
    "the GIL up: its hooks pay a hand-off each, not a forced switch); the other ranks set the pace.",
    "- The interference pass is first-order: one slowdown for the overlapped share, not a kernel-by-kernel "
    "account of who holds which SMs.",
    "- Which Python the study ran: its code asks for Python 3.6+ (ddl-benchmarks README), whose GIL forces "
    "switches every 5 ms; ByteScheduler's own Docker image ran Python 2.7, whose GIL hands over every 100 "
    "bytecodes (public reports of the plugin from that image: bytedance/byteps issues 339 and 370, 7-30% "
    "behind Horovod on one machine).",
    "",
]
"""The report's last section: what the model leaves out."""


if __name__ == "__main__":
    raise SystemExit(main())
