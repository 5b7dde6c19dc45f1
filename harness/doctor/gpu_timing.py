"""The GPU timing checks, serial and alone on the GPU, in one process (README, "GPUs"): the harness's
one-worker cells against bare loops on the same model and batch, and what explains a difference.

    python -m harness.doctor.gpu_timing OUT                                  # the study's workloads, fp32 and bf16
    python -m harness.doctor.gpu_timing OUT --device cpu --workloads bert-base-tiny --warmup 1 --iters 3 --no-bounds

Order (each model built once, in this process):
  round A   per workload and dtype, interleaved: the bare loop (harness/doctor/bare_loop.py); the bare loop with one
            CPU thread (as ranks run: OMP_NUM_THREADS=1); the bare loop with a device synchronisation per
            iteration (what the harness's loop did before it read its events after the window); the
            harness's own loop (harness/measure/loop.py) called in this process;
  harness   the harness's `local` cells, one warm `ddlbench sweep` in a child process (OUT/sweep/);
  round B   round A again, variants in reverse order;
  pairs     for each case whose bare loop moved more than REFERENCE_SPREAD between A and B: the harness's loop
            in-process alternated with the bare loop in short pairs (harness/doctor/paired.py);
  kernels   torch.profiler over one bare iteration per case: kernels and copies per iteration;
  profiles  `ddlbench profile` of resnet50, bert-base, bert-large (fp32) against the bare loop (15%), then the
            study's table predicted from them (OUT/profiles/, OUT/prediction/).
The machine's state is read before, between and after (nvidia-smi: clocks, power, throttling, other compute
processes; CPU affinity, quota, threads, load): OUT/host.json.

Writes OUT/throughput.csv (per workload and dtype: harness cell, bare before/after, ratio, MFU, launch-bound,
verdict), OUT/variants.csv (every timed loop), OUT/kernels.csv. Exit status 1 when a ratio lies outside
[RATIO_LOW, RATIO_HIGH] against a steady reference or a profile misses its bare loop by more than
PROFILE_TOLERANCE (--no-bounds: never). A ratio against a reference that moved more than REFERENCE_SPREAD
between its rounds is decided on its paired timings (OUT/pairs.csv) instead, or `undecided` when those scatter
too, printed as NOT DECIDED with the spread.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path

import pandas as pd
import torch

from harness.contracts.training import make_optimizer
from harness.doctor.bare_loop import Bare
from harness.doctor.host_state import Parts
from harness.doctor.paired import bare_rounds, decide, paired, spread, spreads, summarise
from harness.measure.loop import run_loop
from harness.predict.profiler import run_profile
from harness.schemes import SCHEMES, SchemeContext

ROOT = Path(__file__).resolve().parents[2]
STUDY = ("resnet50", "bert-base", "bert-large", "gpt2-small")
"""The real workloads at their registered (the study's) batch and sequence length."""
PROFILED = ("resnet50", "bert-base", "bert-large")
"""The study's table is predicted from these three profiles."""
RATIO_LOW, RATIO_HIGH = 0.995, 1.03
"""harness / bare: the harness may cost at most 0.5%, and may never be faster than a bare loop by more than
the two bare runs' own spread allows (a harness faster than its reference measures something else)."""
REFERENCE_SPREAD = 0.02
"""The bare loop's rounds before and after the harness may differ by at most this share for a ratio to be
decided. Where the host's dispatch speed sets the pace (a launch-bound or nearly launch-bound cell), it drifts:
15-28% between the two rounds on the H200 of reports/gpu/2026-11-26-h200-after, every variant with it (the
bare loop, one thread, a sync per iteration, the harness's loop in this process). Against a reference that
moves that much a bound of 0.5% decides nothing: such a cell is decided on paired in-process timings instead
(harness/doctor/paired.py), and is `undecided` (printed with the spread, never a pass) when those scatter too."""
PROFILE_TOLERANCE = 0.15
"""A profiled iteration (events in every hook) against the bare loop's."""
EXTRA_SHARE = 2 / 3
"""Each variant beside the plain bare loop times this share of its --iters (20 of 30): the plain loop is the
reference, the variants explain it."""


class InProcessHarness:
    """The harness's timing loop and `local` scheme around an already built model (no process, no group)."""

    def __init__(self, bare: Bare):
        entry = SCHEMES.get("local")
        self.bare = bare
        self.scheme = entry.cls(SchemeContext(transport=None, rank=0, workers=1, device=bare.device,
                                              knobs=entry.make_knobs(None), make_optimizer=make_optimizer,
                                              dtype=bare.dtype))
        self.fwd = self.scheme.setup(bare.model)

    def time(self, warmup: int, iters: int) -> dict:
        samples = run_loop(self.fwd, self.scheme, self.bare.loss, self.bare.data, warmup, iters, self.bare.device,
                           lambda: None)
        t = statistics.median(s["iter_s"] for s in samples)
        return {"iter_s": t, "throughput": self.bare.batch / t,
                "host_issue_s": statistics.median(s["host_issue_s"] for s in samples),
                "device_lag_s": statistics.median(s["device_lag_s"] for s in samples)}


VARIANTS = ("bare", "bare-1-thread", "bare-sync-per-iteration", "harness-loop-in-process")


def one_round(name: str, models: dict, harness: dict, cases: list, warmup: int, iters: int,
              reverse: bool) -> list[dict]:
    rows = []
    for wl, dtype in cases:
        bare = models[wl].use(dtype)
        order = VARIANTS[::-1] if reverse else VARIANTS
        for v in order:
            n = iters if v == "bare" else max(1, round(iters * EXTRA_SHARE))
            if v == "harness-loop-in-process":
                r = harness[wl].time(warmup, n)
            else:
                r = bare.time(warmup, n, threads=1 if v == "bare-1-thread" else None,
                              sync_each=v == "bare-sync-per-iteration")
            rows.append({"round": name, "workload": wl, "dtype": dtype, "variant": v, "iters": n,
                         "iter_s": r["iter_s"], "per_s": r["throughput"],
                         "host_issue_s": r.get("host_issue_s"), "device_lag_s": r.get("device_lag_s")})
            print(f"[gpu_timing] {name} {wl:12s} {dtype} {v:26s} {r['throughput']:9.1f}/s", flush=True)
    return rows


def harness_cells(out: Path, cases: list, device: str, warmup: int, iters: int) -> pd.DataFrame:
    """The harness's `local` cells as a user runs them: one warm sweep (child processes)."""
    workloads = sorted({wl for wl, _ in cases}, key=[wl for wl, _ in cases].index)
    dtypes = sorted({d for _, d in cases}, key=[d for _, d in cases].index)
    sweep = out / "sweep.yaml"
    sweep.write_text(f"name: gpu-timing\nworkloads: [{', '.join(workloads)}]\nschemes: [local]\nworkers: [1]\n"
                     f"dtype: [{', '.join(dtypes)}]\nwarmup: {warmup}\niters: {iters}\ndevice: {device}\n"
                     f"timeout_s: 900\n")
    run = out / "sweep"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    subprocess.run([sys.executable, "-m", "harness.cli.main", "sweep", str(sweep), "--output", str(run), "--no-progress"],
                   check=True, cwd=ROOT, env=env, timeout=1200)
    return pd.read_parquet(run / "summary.parquet")


def kernels(models: dict, cases: list) -> list[dict]:
    """Kernels (and copies, sets) the device ran for one bare iteration, and the host's time for it."""
    from torch.profiler import (  # heavy, and only here: imported on use
        ProfilerActivity,
        profile,
    )

    rows = []
    for wl, dtype in cases:
        bare = models[wl].use(dtype)
        acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if bare.device.type == "cuda" else [])
        bare.step()
        bare.sync()
        with profile(activities=acts) as prof:
            bare.step()
            bare.sync()
        events = prof.events()
        device_ops = [e for e in events if getattr(e, "device_type", None) == torch.autograd.DeviceType.CUDA]
        cpu_ops = [e for e in events if getattr(e, "device_type", None) == torch.autograd.DeviceType.CPU]
        rows.append({"workload": wl, "dtype": dtype, "device_ops_per_iter": len(device_ops),
                     "cpu_ops_per_iter": len(cpu_ops)})
    return rows


def profiles(out: Path, device: str, bare_iter: dict) -> list[dict]:
    """`ddlbench profile` of the study's three against the bare loop, then the study's table from them."""
    folder = out / "profiles"
    folder.mkdir(parents=True, exist_ok=True)
    rows = []
    for wl in bare_iter:
        df, _ = run_profile(wl, None, None, iters=10, warmup=3, threads=1, device=device,
                            output=folder / f"profile-{wl}.parquet", dtype="fp32")
        profiled = float(df["forward_s"].sum() + df["backward_total_s"].iloc[0] + df["optimizer_s"].sum())
        ratio = profiled / bare_iter[wl]
        rows.append({"workload": wl, "profiled_iter_s": profiled, "bare_iter_s": bare_iter[wl], "ratio": ratio,
                     "ok": abs(ratio - 1) <= PROFILE_TOLERANCE})
    if set(bare_iter) == set(PROFILED):
        subprocess.run([sys.executable, str(ROOT / "scripts" / "study_prediction.py"), "--profiles", str(folder),
                        "--out", str(out / "prediction"), "--samples", "8", "--no-sensitivity"],
                       check=True, cwd=ROOT, timeout=900)  # the curve with coarse intervals: seconds, not minutes
    return rows


def verdicts(variants: pd.DataFrame, cells: pd.DataFrame, bounds: bool,
             pairs: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per (workload, dtype): the cell against the bare rounds, decided there when the bare loop held
    still, else on the paired in-process timings where there are some (`decided_by`)."""
    rows = []
    for (wl, dtype), (before, after) in bare_rounds(variants).items():
        cell = cells[(cells["workload"] == wl) & (cells["dtype"] == dtype)].iloc[0]
        ratio = cell["throughput_median"] / statistics.mean([before, after])
        moved = spread(before, after)
        verdict, decided_by, p_ratio, p_disp = judge(ratio, moved), "cell", float("nan"), float("nan")
        mine = pairs[(pairs["workload"] == wl) & (pairs["dtype"] == dtype)] if pairs is not None else ()
        if len(mine):
            p_ratio, p_disp = summarise(mine["ratio"].tolist())
            if verdict == "undecided":
                verdict, decided_by = decide(p_ratio, p_disp, RATIO_LOW, RATIO_HIGH), "paired in-process"
        if verdict == "undecided":
            decided_by = ""
        if not bounds:
            verdict = "recorded"
        rows.append({"workload": wl, "dtype": dtype, "batch": int(cell["batch_per_worker"]),
                     "seq_len": cell["seq_len"], "gpu": cell.get("gpu_models", ""),
                     "harness_per_s": cell["throughput_median"], "bare_before_per_s": before,
                     "bare_after_per_s": after, "bare_spread": moved,
                     "ratio": ratio, "mfu": cell.get("mfu"), "launch_bound": cell.get("launch_bound"),
                     "host_issue_s": cell.get("host_issue_s"), "device_lag_s": cell.get("device_lag_s"),
                     "iter_s_median": cell["iter_s_median"], "paired_ratio": p_ratio,
                     "paired_dispersion": p_disp, "verdict": verdict, "decided_by": decided_by,
                     "ok": verdict in ("ok", "recorded")})
    return pd.DataFrame(rows)


def judge(ratio: float, moved: float) -> str:
    """`ok` (harness / bare within [RATIO_LOW, RATIO_HIGH]), `FAILED` (outside, against a steady reference) or
    `undecided` (the reference itself moved more than REFERENCE_SPREAD between its two rounds)."""
    if moved > REFERENCE_SPREAD:
        return "undecided"
    return "ok" if RATIO_LOW <= ratio <= RATIO_HIGH else "FAILED"


def measure_all(a, out: Path, parts: Parts) -> tuple[pd.DataFrame, pd.DataFrame, list]:
    """(variants, verdicts, profile checks): the rounds around the harness sweep, kernels, profiles."""
    cases = [(wl, d) for wl in a.workloads for d in a.dtypes]
    models = parts.run("build", lambda: {wl: Bare(wl, device=a.device) for wl in a.workloads})
    harness = {wl: InProcessHarness(models[wl]) for wl in a.workloads}
    rows = parts.run("round A", one_round, "A", models, harness, cases, a.warmup, a.iters, False, state=True)
    cells = parts.run("harness sweep", harness_cells, out, cases, a.device, a.warmup, a.iters, state=True)
    rows += parts.run("round B", one_round, "B", models, harness, cases, a.warmup, a.iters, True, state=True)
    variants = pd.DataFrame(rows)
    variants.to_csv(out / "variants.csv", index=False)
    drifting = [c for c, sp in spreads(variants).items() if a.paired == "all" or sp > REFERENCE_SPREAD]
    pairs = parts.run("pairs", paired, models, harness, drifting, min(a.warmup, 2), max(3, a.iters // 3))
    pairs.to_csv(out / "pairs.csv", index=False)
    parts.run("kernels", lambda: pd.DataFrame(kernels(models, cases)).to_csv(out / "kernels.csv", index=False))
    table = verdicts(variants, cells, not a.no_bounds, pairs)
    table.to_csv(out / "throughput.csv", index=False)
    prof = []
    if not a.no_profiles:
        bare_fp32 = variants[(variants["variant"] == "bare") & (variants["dtype"] == "fp32")]
        wanted = [wl for wl in PROFILED if wl in a.workloads] or a.workloads[:1]
        bare_iter = {wl: float(bare_fp32[bare_fp32["workload"] == wl]["iter_s"].mean()) for wl in wanted
                     if (bare_fp32["workload"] == wl).any()}
        del models, harness
        prof = parts.run("profiles", profiles, out, a.device, bare_iter)
        pd.DataFrame(prof).to_csv(out / "profile-check.csv", index=False)
    return variants, table, prof


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--workloads", nargs="+", default=list(STUDY))
    ap.add_argument("--dtypes", nargs="+", default=["fp32", "bf16"])
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--iters", type=int, default=30)
    ap.add_argument("--no-bounds", action="store_true", help="record, never fail (a CPU run of the logic)")
    ap.add_argument("--no-profiles", action="store_true", help="skip the profile check")
    ap.add_argument("--paired", choices=("drifting", "all"), default="drifting",
                    help="which cases get the paired in-process timings (harness/doctor/paired.py)")
    a = ap.parse_args(argv)
    a.out.mkdir(parents=True, exist_ok=True)
    parts = Parts()
    _, table, prof = measure_all(a, a.out, parts)
    parts.write(a.out)
    print(table[["workload", "dtype", "harness_per_s", "bare_before_per_s", "bare_after_per_s", "ratio", "mfu",
                 "launch_bound", "bare_spread", "paired_ratio", "verdict"]].to_string(index=False))
    for name, s in parts.seconds.items():
        print(f"[gpu_timing] {name}: {s:.0f} s")
    for r in table.itertuples():
        if r.verdict == "undecided":
            print(f"[gpu_timing] NOT DECIDED {r.workload} {r.dtype}: harness/bare {r.ratio:.3f}, but the bare loop "
                  f"moved {r.bare_spread:.1%} between its rounds (more than {REFERENCE_SPREAD:.0%}) and its paired "
                  f"timings scatter {r.paired_dispersion:.1%}: the host's pace drifts here", file=sys.stderr)
    bad = [f"{r.workload} {r.dtype}: harness/bare {r.paired_ratio if r.decided_by != 'cell' else r.ratio:.3f} "
           f"({r.decided_by}) outside [{RATIO_LOW}, {RATIO_HIGH}]"
           for r in table.itertuples() if r.verdict == "FAILED"]
    bad += [f"{p['workload']}: profile {p['profiled_iter_s']:.4f} s vs bare {p['bare_iter_s']:.4f} s"
            for p in prof if not p["ok"] and not a.no_bounds]
    for line in bad:
        print(f"[gpu_timing] FAILED {line}", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
