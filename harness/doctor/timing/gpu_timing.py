"""The GPU timing check: the harness's one-worker cells against bare loops, in one process.

The GPU timing checks, serial and alone on the GPU, in one process (README, "GPUs"): the harness's one-worker
cells against bare loops on the same model and batch, the profiles, and what explains a difference, each stage
sized to the time left and recorded in the report's summary as it ends.

    python -m harness.doctor.timing.gpu_timing OUT                               # the study's workloads, fp32 and bf16
    python -m harness.doctor.timing.gpu_timing OUT --device cpu --workloads bert-base-tiny resnet50-tiny --dtypes fp32
    python -m harness.doctor.timing.gpu_timing DETAILS --summary OUT --budget-s 200 # as scripts/gpu_report.sh runs it

Stages (harness/doctor/timing/rounds.py times them; harness/doctor/timing/budget.py estimates them):
  build       each workload's model once, in this process;
  round A     the bare loop of every case (workload x dtype), --warmup + --iters (5 + 20: a device-bound cell is
              steady to 0.1% in 20 iterations on an H200);
  harness     the harness's `local` cells, one warm `ddlbench sweep` in a child process (OUT/sweep/);
  round B     round A again, in reverse order: then one verdict per case (harness/doctor/timing/verdicts.py);
  pairs       device-bound cases whose bare loop moved more than 2% between its rounds: the harness's loop and the
              bare loop alternated in one process (paired.py); on a CPU every case, the cell's own process
              alternated with a bare loop's (cpu_pairs.py);
  kernels     torch.profiler over one bare iteration per case: kernels and host operations per iteration;
  profiles    `ddlbench profile` of resnet50, bert-base, bert-large (fp32) against the bare loop timed just before
              and after it (within 15% of both; undecided when the bare loop itself moved across the bound);
  prediction  the study's table predicted from those profiles (OUT/prediction/);
  variants    only for cases that FAILED or drifted: the variants that explain them (rounds.VARIANTS).
A stage that does not fit the time left is `NOT RUN: no time left (needs about N s)`. OUT gets throughput.csv,
variants.csv, pairs.csv, kernels.csv, profile-check.csv, host.json; the summary (--summary, default OUT) one row
per case and check (harness/doctor/timing/summary.py). Exit status 1 when a check FAILED (--no-bounds: never).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
from pathlib import Path

import pandas as pd

from harness.doctor.timing import budget as B
from harness.doctor.timing.bare_loop import Bare
from harness.doctor.timing.cpu_pairs import process_pairs
from harness.doctor.timing.paired import paired, spread, spreads
from harness.doctor.timing.rounds import (
    ROOT,
    VARIANTS,
    InProcessHarness,
    bare_round,
    harness_cells,
    kernels,
    variant_round,
)
from harness.doctor.timing.timing_run import (
    PROFILE_ITERS,
    PROFILE_TOLERANCE,
    PROFILE_WARMUP,
    PROFILED,
    STUDY,
    Run,
    case_name,
)
from harness.doctor.timing.verdicts import CPU_RATIO_HIGH, CPU_RATIO_LOW, REFERENCE_SPREAD, figure, verdicts
from harness.predict.profiler import run_profile


def measure_cases(run: Run, models: dict, harness: dict) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Rounds A and B around the harness cells, then the pairs; one verdict row per case."""
    a, names = run.a, [case_name(c) for c in run.cases]
    threads = 1 if a.device == "cpu" else None  # a CPU rank runs one thread; on a GPU the bare loop as users run it
    ok, rows = run.stage(
        "round A", names, run.rounds_s(), bare_round, "A", models, run.cases, a.warmup, a.iters, False, threads
    )
    if not ok:
        return pd.DataFrame(), pd.DataFrame()
    run.measured.update({(r["workload"], r["dtype"]): r["iter_s"] for r in rows})
    cell_s = len(run.cases) * B.CELL_OVERHEAD_S + B.loop_s(run.cases, a.warmup + a.iters, run.measured)
    ok, cells = run.stage(
        "harness sweep",
        names,
        cell_s,
        harness_cells,
        run.out,
        run.cases,
        a.device,
        a.warmup,
        a.iters,
        max(1.0, run.budget.left()),
    )
    if not ok:
        return pd.DataFrame(rows), pd.DataFrame()
    ok, later = run.stage(
        "round B",
        names,
        B.loop_s(run.cases, a.warmup + a.iters, run.measured),
        bare_round,
        "B",
        models,
        run.cases,
        a.warmup,
        a.iters,
        True,
        threads,
    )
    variants = pd.DataFrame(rows + (later or []))
    variants.to_csv(run.out / "variants.csv", index=False)
    if not ok:
        return variants, pd.DataFrame()
    pairs = measure_pairs(run, models, harness, variants, cells)
    table = verdicts(variants, cells, not a.no_bounds, pairs, pairs_decide=a.device == "cpu")
    table.to_csv(run.out / "throughput.csv", index=False)
    for r in table.to_dict("records"):
        status = r["verdict"].split(":")[0] if r["verdict"] != "recorded" else "ok"
        run.failed |= status == "FAILED"
        name = case_name((r["workload"], r["dtype"]))
        why = "; ".join(x for x in (reason(r, a.device), run.notes.get(name, "")) if x)
        run.summary.update(name, status=status, verdict=r["text"], figure=figure(r), reason=why)
    return variants, table


def reason(r: dict, device: str) -> str:
    """Why a case's verdict is what it is, in a sentence."""
    if r["decided_by"] == "host-bound":
        return (
            "the device stayed less than half an iteration behind the host: the host's pace sets this cell, "
            "so no bound decides it; a larger per-GPU batch or sequence measures the GPU"
        )
    if r["decided_by"] == "paired":
        return (
            "median of alternated pairs, the cell's own process against a bare loop's (one thread each), "
            f"within [{CPU_RATIO_LOW}, {CPU_RATIO_HIGH}] on a CPU"
            if device == "cpu"
            else "median of alternated in-process pairs: the bare loop moved between its rounds"
        )
    if r["decided_by"] == "cell":
        return "against the bare loop's rounds, which held still"
    if r["verdict"] == "undecided":
        return "the machine's pace moved more than the bounds allow: measure again with nothing else running"
    return ""


def measure_pairs(run: Run, models: dict, harness: dict, variants: pd.DataFrame, cells: pd.DataFrame) -> pd.DataFrame:
    """Paired timings where the verdicts need them: on a CPU every case (processes), on a GPU the device-bound
    cases whose bare loop moved more than REFERENCE_SPREAD (in-process)."""
    a = run.a
    if a.device == "cpu":
        todo = run.cases
    else:
        bound = {
            (w, d): bool(b) for w, d, b in zip(cells["workload"], cells["dtype"], cells["host_bound"].fillna(False))
        }
        todo = [
            c
            for c, sp in spreads(variants).items()
            if not bound.get(c) and (a.paired == "all" or sp > REFERENCE_SPREAD)
        ]
    names = [case_name(c) for c in todo]
    if a.device == "cpu":
        ok, pairs = run.stage(
            "pairs", names, run.pairs_s(todo), process_pairs, todo, run.out / "pairs", a.warmup, a.iters, a.pairs
        )
    else:
        ok, pairs = run.stage(
            "pairs", names, run.pairs_s(todo), paired, models, harness, todo, run.pair_warmup(), run.pair_iters()
        )
    pairs = (
        pairs
        if ok
        else pd.DataFrame(columns=["workload", "dtype", "pair", "first", "bare_per_s", "harness_per_s", "ratio"])
    )
    pairs.to_csv(run.out / "pairs.csv", index=False)
    return pairs


def profile_verdict(profiled: float, before: float, after: float) -> tuple[str, str]:
    """(status, reason) of a profile's iteration against the bare loop timed just before and just after it: ok
    within PROFILE_TOLERANCE of both, FAILED outside it against both, else undecided (the bare loop itself moved
    across the bound: a host-bound cell's pace, README "GPUs"). Pure."""
    inside = [abs(profiled / t - 1) <= PROFILE_TOLERANCE for t in (before, after)]
    if all(inside):
        return "ok", f"within {PROFILE_TOLERANCE:.0%} of the bare loop timed before and after it"
    if not any(inside):
        return "FAILED", f"more than {PROFILE_TOLERANCE:.0%} from the bare loop timed before and after it"
    return "undecided", f"the bare loop moved {spread(1 / before, 1 / after):.0%} around the profile"


def measure_profiles(run: Run, models: dict) -> None:
    """Each profile against the bare loop timed just before and after it, then the study's table from the three."""
    folder = run.out / "profiles"
    folder.mkdir(parents=True, exist_ok=True)
    threads = 1 if run.a.device == "cpu" else None
    checks = []
    for wl in run.profiled:
        name = f"profile {wl}"
        bare = lambda w=wl: models[w].use("fp32").time(PROFILE_WARMUP, PROFILE_ITERS, threads=threads)["iter_s"]
        ok, got = run.stage(
            name,
            [name],
            run.profile_s(wl),
            lambda w=wl, bare=bare: (
                bare(),
                run_profile(
                    w, None, None, PROFILE_ITERS, PROFILE_WARMUP, 1, run.a.device, folder / f"profile-{w}.parquet"
                )[0],
                bare(),
            ),
        )
        if not ok:
            continue
        before, df, after = got
        profiled = float(df["forward_s"].sum() + df["backward_total_s"].iloc[0] + df["optimizer_s"].sum())
        status, why = profile_verdict(profiled, before, after)
        status = "ok" if run.a.no_bounds else status
        run.failed |= status == "FAILED"
        ratio = profiled / statistics.mean([before, after])
        checks.append(
            {
                "workload": wl,
                "profiled_iter_s": profiled,
                "bare_before_iter_s": before,
                "bare_after_iter_s": after,
                "ratio": ratio,
                "verdict": status,
            }
        )
        run.summary.update(
            name,
            status=status,
            verdict=status if status != "undecided" else f"undecided: {why}",
            figure=f"profile/bare {ratio:.3f} (bare {before * 1e3:.1f} and {after * 1e3:.1f} ms)",
            reason=why,
        )
    pd.DataFrame(checks).to_csv(run.out / "profile-check.csv", index=False)
    if set(run.profiled) == set(PROFILED) and len(checks) == len(PROFILED):  # undecided ones too
        name = "study table from the profiles"
        argv = [
            *(sys.executable, "-m", "experiments.study_prediction.run"),  # the study's report, run from ROOT
            "--profiles",
            str(folder),
            "--out",
            str(run.out / "prediction"),
            "--samples",
            "8",
        ]  # coarse intervals; no sensitivity corners (the report's default)
        ok, _ = run.stage(
            "prediction",
            [name],
            B.ESTIMATE_S["prediction"],
            lambda: subprocess.run(
                argv, check=True, cwd=ROOT, timeout=max(1.0, run.budget.left()), capture_output=True
            ),
        )
        if ok:
            run.summary.update(name, status="ok", figure="prediction/report.md in details.tar.gz")
    elif set(run.profiled) == set(PROFILED):
        run.summary.update(
            "study table from the profiles", status="NOT RUN", verdict="NOT RUN: needs the three profiles"
        )


def explain(run: Run, models: dict, harness: dict, table: pd.DataFrame) -> None:
    """The variants, for the device-bound cases that FAILED or drifted (variants.csv, round `variants`)."""
    name, a = "variants", run.a
    todo = [
        (r["workload"], r["dtype"])
        for r in table.to_dict("records")
        if not (pd.notna(r["host_bound"]) and bool(r["host_bound"]))
        and (r["verdict"] == "FAILED" or r["bare_spread"] > REFERENCE_SPREAD)
    ]
    if not todo:
        run.summary.update(name, status="ok", verdict="not needed: no device-bound case failed or drifted")
        return
    n = a.warmup + a.iters + (len(VARIANTS) - 1) * (a.warmup + round(a.iters * 2 / 3))
    ok, rows = run.stage(
        name,
        [name],
        B.loop_s(todo, n, run.measured),
        variant_round,
        "variants",
        models,
        harness,
        todo,
        a.warmup,
        a.iters,
    )
    if ok:
        pd.concat([pd.read_csv(run.out / "variants.csv"), pd.DataFrame(rows)]).to_csv(
            run.out / "variants.csv", index=False
        )
        run.summary.update(
            name,
            status="ok",
            figure=", ".join(f"{w} {d}" for w, d in todo),
            reason="variants.csv in details.tar.gz: one thread, a sync per iteration, the loop in-process",
        )


def count_kernels(run: Run, models: dict) -> None:
    name = "kernels per iteration"
    ok, rows = run.stage("kernels", [name], B.ESTIMATE_S["kernels"], kernels, models, run.cases)
    if ok:
        pd.DataFrame(rows).to_csv(run.out / "kernels.csv", index=False)
        top = max(rows, key=lambda r: r["cpu_ops_per_iter"])
        run.summary.update(
            name,
            status="ok",
            figure=f"most: {top['workload']} {top['dtype']} "
            f"{top['device_ops_per_iter']} device / {top['cpu_ops_per_iter']} host operations",
            reason="kernels.csv in details.tar.gz",
        )


def parse(argv) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out", type=Path, help="folder for the details (CSVs, sweep, profiles)")
    ap.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    ap.add_argument("--workloads", nargs="+", default=list(STUDY))
    ap.add_argument("--dtypes", nargs="+", default=["fp32", "bf16"])
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--budget-s", type=float, help="seconds this run may take (default: no limit)")
    ap.add_argument("--summary", type=Path, help="folder of the report's summary.{md,json} (default: OUT)")
    ap.add_argument("--pairs", type=int, default=6, help="alternated pairs per case on a CPU")
    ap.add_argument("--no-bounds", action="store_true", help="record, never fail (a CPU run of the logic)")
    ap.add_argument("--no-profiles", action="store_true", help="skip the profile check")
    ap.add_argument(
        "--paired",
        choices=("drifting", "all"),
        default="drifting",
        help="which device-bound cases get the in-process paired timings on a GPU",
    )
    return ap.parse_args(argv)


def main(argv=None) -> int:
    a = parse(argv)
    a.out.mkdir(parents=True, exist_ok=True)
    run = Run(a)
    alone = not run.summary.json.exists()  # else scripts/gpu_report.sh planned the summary and finishes it
    if alone:
        run.summary.plan(
            {
                "title": f"GPU timing check ({a.device})",
                "budget_s": a.budget_s,
                "command": "python -m harness.doctor.timing.gpu_timing " + " ".join(argv or sys.argv[1:]),
            },
            run.plan(),
        )
    else:
        run.summary.add(run.plan())
    everything = [r["check"] for r in run.plan()]  # no model, no verdict: build only when the rounds fit too
    ok, models = run.stage(
        "build",
        everything,
        B.ESTIMATE_S["build"] + run.rounds_s(),
        lambda: {wl: Bare(wl, device=a.device) for wl in a.workloads},
        running=False,
    )
    if ok:
        harness = {wl: InProcessHarness(models[wl]) for wl in a.workloads}
        _, table = measure_cases(run, models, harness)
        count_kernels(run, models)
        if not a.no_profiles:
            measure_profiles(run, models)
        if len(table):
            explain(run, models, harness, table)
    for r in run.summary.pending():  # a stage that never started (build failed, no time): say so
        if r["part"] == "timing":
            run.summary.update(
                r["check"],
                status="NOT RUN",
                verdict="NOT RUN: an earlier stage did not finish",
                reason=run.notes.get(r["check"], ""),
            )
    run.parts.write(a.out)
    if alone:
        run.summary.finish()
    for r in run.summary.load()["checks"]:
        print(
            f"[gpu_timing] {r['check']}: {r['verdict']} {r['figure']}",
            file=sys.stderr if r["status"] == "FAILED" else sys.stdout,
        )
    for name, sec in run.parts.seconds.items():
        print(f"[gpu_timing] {name}: {sec:.0f} s")
    return 1 if run.failed and not a.no_bounds else 0


if __name__ == "__main__":
    raise SystemExit(main())
