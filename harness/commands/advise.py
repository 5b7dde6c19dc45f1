"""`ddlbench advise`: which method and knobs to use for this workload on this placement, with evidence.

    ddlbench advise --workload bert-base-tiny --workers 2                   # this box
    ddlbench advise --workload mypkg.models:build --workers 2 --testbed     # the emulated hosts that are up
    ddlbench advise --workload bert-base --workers 16                        # inside a Slurm allocation

Profile the model and measure the network (or take stored ones), predict every method over the knob grid
declared beside its knobs (harness/advise/candidates.py), measure the best predicted few plus DDP with
its default knobs as ordinary cells of an ordinary run directory (through `ddlbench sweep`'s own
function: one sweep file per candidate and try, kept under RUN/advise/sweeps/), re-measure the best two in
alternated rounds when their CIs overlap, and write RUN/advise/report.md. Resumable: run it again with
--resume and the same options, and it measures only what is missing.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import re
import time
from pathlib import Path

import click
import pandas as pd
import torch
import yaml

from harness.advise.candidates import Candidate, Layout, candidates, reference, shortlist, sweep_mapping
from harness.advise.inputs import commbench_table, profile_table
from harness.advise.measure import Policy, alternated_rounds, frame, measure
from harness.advise.predicted import measured_network, predict_candidates, preset_network
from harness.advise.recommend import recommend
from harness.advise.report import render
from harness.atomic import write_text_atomic
from harness.backends import BACKENDS
from harness.commands.sweep import run_sweep
from harness.errors import UserError
from harness.launch.base import Launcher
from harness.launch.launchers import choose_launcher
from harness.launch.nodes_env import node_job
from harness.predict.compute import compute_model
from harness.predict.network import get_link
from harness.results.files import check_output_dir
from harness.results.store import holds_run, new_run_id
from harness.schemes import SCHEMES
from harness.testbed import netns
from harness.testbed import placement as pl
from harness.testbed.sweep import rate_label
from workloads import WORKLOADS


@dataclasses.dataclass(frozen=True)
class Where:
    """Where the candidates run, and the sweep settings that put them there."""

    layout: Layout
    label: str
    """this box | the emulated testbed (N hosts at R) | Slurm allocation (N nodes)."""
    sweep: dict
    """Sweep-file settings for the place (testbed block), merged into every candidate's file."""
    shaped: bool = False
    """Token-bucket shaped links (the testbed)."""
    shared_cores: bool = True
    """Every worker computes on this machine's cores (one box, the testbed)."""
    launcher: Launcher | None = None
    """What starts the network's measurement across nodes (srun in an allocation); None: here."""


def where(workers: int, servers: int, testbed: bool) -> Where:
    if testbed:
        s = netns.status()
        if s is None:
            raise UserError("--testbed needs a testbed that is up, and none is: start one with "
                            "`ddlbench testbed up --hosts 2 --rate 500mbit`")
        nodes = pl.nodes_for(workers, len(s.hosts))
        return Where(Layout(workers, nodes, servers, len(s.hosts) - nodes),
                     f"the emulated testbed ({len(s.hosts)} hosts at {rate_label(s.rate_mbit)})",
                     {"testbed": {"hosts": len(s.hosts), "rate": f"{s.rate_mbit:g}mbit"}}, shaped=True)
    if os.environ.get("SLURM_JOB_ID"):
        launch = choose_launcher()
        nodes = launch.nodes_for(workers)
        hosts = len(launch.env_extra.get("hosts", "").split(","))
        return Where(Layout(workers, nodes, servers, max(0, hosts - nodes)), f"Slurm allocation ({hosts} nodes)",
                     {}, shared_cores=False, launcher=launch)
    return Where(Layout(workers, 1, servers, 0), "this box", {})


def _slug(label: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", label).strip("-")


def sweep_runner(base: dict, sweeps: Path, progress: bool, oversubscribe: bool):
    """run(candidate, iters, run_dir) over `ddlbench sweep`'s function: writes the candidate's sweep file
    (kept: it reproduces that cell) and runs it into run_dir, skipping what is already there."""
    def run(c: Candidate, iters: int, run_dir: Path) -> None:
        path = sweeps / f"{_slug(c.label)}-i{iters}.yaml"
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            write_text_atomic(path, yaml.safe_dump(sweep_mapping(c, base, iters, "advise"), sort_keys=False))
        run_sweep(path, run_dir, resume=True, progress=progress, oversubscribe=oversubscribe)
    return run


def predictions(workload, batch, seq_len, device, place: Where, methods, full_grid, profile, commbench, network,
                keep: Path) -> tuple[pd.DataFrame, dict, str]:
    """(predicted table, skipped methods, a line on the inputs)."""
    usable = {b: BACKENDS.get(b).available() is None for b in BACKENDS}
    cands, skipped = candidates(methods, place.layout, usable, full_grid)
    if not any(c.is_reference for c in cands):
        cands.append(reference())
    concurrent = place.layout.workers if place.shared_cores and device == "cpu" else 1
    prof = profile_table(workload, batch, seq_len, device, concurrent, profile, keep / "profile.parquet")
    if network:
        net = preset_network(network)
        how = f"network preset {network}"
    else:
        pushpull = any(c.servers for c in cands)
        cb = commbench_table(place.layout, device, "testbed" in place.sweep, pushpull, commbench,
                             keep / "commbench.parquet", place.launcher)
        net = measured_network(cb, place.layout, place.shaped, "measured")
        how = f"network measured (all-reduce{' and push-pull' if pushpull else ''}, commbench)"
    pred = predict_candidates(cands, compute_model(prof), net, place.layout)
    return pred, skipped, f"profile of {len(prof)} tensors ({'given' if profile else 'measured here'}); {how}"


def run_advise(workload: str, workers: int, *, output: Path | None = None, resume: bool = False, testbed: bool = False,
               servers: int = 1, schemes: str = "all", full_grid: bool = True, top_k: int = 6, policy: Policy = Policy(),
               warmup: int = 5, batch: int | None = None, seq_len: int | None = None, device: str = "auto",
               timeout_s: float = 600.0, profile: Path | None = None, commbench: tuple = (), network: str | None = None,
               oversubscribe: bool = False, progress: bool = True) -> tuple[Path, str]:
    """Everything `ddlbench advise` does; returns (run directory, the recommendation line)."""
    t0 = time.monotonic()
    WORKLOADS.get(workload)
    if workers < 2 or top_k < 1 or servers < 1 or policy.iters < 2 or policy.max_iters < policy.iters:
        raise UserError("advise needs --workers >= 2, --top-k >= 1, --servers >= 1 and 2 <= --iters <= --max-iters")
    device = device if device != "auto" else ("cuda" if torch.cuda.is_available() else "cpu")
    methods = [n for n in SCHEMES if n != "local"] if schemes == "all" else [s.strip() for s in schemes.split(",")]
    for m in methods:
        SCHEMES.get(m)
    _check_inputs(profile, commbench, network)
    _check_one_place(testbed)
    run_dir = output or Path("results") / new_run_id("advise")
    check_output_dir(run_dir)
    if holds_run(run_dir) and not resume:
        raise UserError(f"{run_dir} already holds a run: add --resume to go on with it, or give another --output")
    keep = run_dir / "advise"
    lease = netns.lease(f"ddlbench advise {workload}") if testbed else contextlib.nullcontext()
    with lease:
        place = where(workers, servers, testbed)
        pred, skipped, inputs = predictions(workload, batch, seq_len, device, place, methods, full_grid, profile,
                                            commbench, network, keep)
        keep.mkdir(parents=True, exist_ok=True)
        pred.to_csv(keep / "predicted.csv", index=False)
        base = {"workloads": [workload], "workers": [workers], "warmup": warmup, "device": device,
                "timeout_s": timeout_s, **({"batch": batch} if batch else {}), **({"seq_len": seq_len} if seq_len else {}),
                **place.sweep}
        run = sweep_runner(base, keep / "sweeps", progress, oversubscribe)
        by_label = {c.label: c for c in _all(pred)}
        short = shortlist([by_label[label] for label in pred["label"]], top_k, list(pred["pred_iter_s"]),
                          same_within=policy.target)
        measured = [measure(c, run, run_dir, policy) for c in short]
        rec, verdict = _decide(measured, run, keep, policy)
    meas = frame(measured)
    meas.to_csv(keep / "measured.csv", index=False)
    winner = sweep_mapping(rec.winner.candidate, base, int(rec.winner.row["iters"]), "advise-winner")
    write_text_atomic(keep / "winner.yaml", yaml.safe_dump(winner, sort_keys=False))
    context = {"workload": workload, "placement": f"{workers} workers on {place.layout.nodes} host(s), "
               f"{place.label}", "inputs": inputs,
               "candidates": f"{len(pred)} predicted, {len(short)} measured ({len(short) / len(pred):.0%}); a knob "
                             f"variant predicted within {policy.target:.0%} of a measured variant of its method "
                             f"is not measured (the model cannot tell them apart)",
               "target": f"95% CI of the mean within {policy.target:.0%}, {policy.iters}-{policy.max_iters} iterations",
               "wall time": f"{time.monotonic() - t0:.0f} s (this invocation)"}
    text = render(rec, pred, meas, context, skipped, winner, str(keep / "winner.yaml"), str(run_dir))
    write_text_atomic(keep / "report.md", text)
    write_text_atomic(keep / "recommendation.json", json.dumps(
        {"winner": rec.winner.candidate.label, "cell_id": rec.winner.cell_ids[-1], "tied": rec.tied,
         "gain": rec.gain, "line": rec.line()}, indent=1))
    return run_dir, rec.line()


def _check_inputs(profile: Path | None, commbench: tuple, network: str | None) -> None:
    """Stored inputs and the preset checked before anything is measured."""
    if network:
        get_link(network)
    for path, make in [(profile, "ddlbench profile WORKLOAD -o FILE")] + [(c, "ddlbench commbench --output DIR")
                                                                          for c in commbench]:
        if path is not None and not Path(path).exists():
            raise UserError(f"{path} does not exist: make it with `{make}`, or leave the option out and advise "
                            f"measures it")


def _check_one_place(testbed: bool) -> None:
    """advise measures on this box, the testbed or across a Slurm allocation; a node of a multi-node job
    without Slurm (Kubeflow, SkyPilot: harness/launch/nodes_env.py) would measure itself alone and
    recommend for a placement it does not have."""
    job = None if testbed or os.environ.get("SLURM_JOB_ID") else node_job(os.environ)
    if job is not None:
        raise UserError(f"advise does not span the nodes of a multi-node job without Slurm ({job.source}: "
                        f"{job.nnodes} nodes) and would measure this node alone; run it on one node with the "
                        f"scheduler's variables unset, then measure its picks across the nodes with `ddlbench "
                        f"sweep RUN/advise/winner.yaml` on every node")


def _all(pred: pd.DataFrame) -> list[Candidate]:
    return [Candidate(r.scheme, r.backend, json.loads(r.knobs_json), int(r.servers), r.server_hosts)
            for r in pred.itertuples()]


def _decide(measured, run, keep: Path, policy: Policy):
    """The recommendation, after alternated rounds of the best two when their CIs overlap."""
    first = recommend(measured)
    verdict = None
    if first.runner_up is not None and policy.rounds and first.winner.estimate.overlaps(first.runner_up.estimate):
        verdict = alternated_rounds(first.winner, first.runner_up, run, keep / "rounds", policy.rounds)
    return recommend(measured, verdict), verdict


@click.command("advise")
@click.option("--workload", required=True, help="Workload name, or your own as package.module:function.")
@click.option("--workers", default=2, show_default=True, type=int, help="Worker processes.")
@click.option("--servers", default=1, show_default=True, type=int,
              help="Parameter servers available: PS candidates try 1..N.")
@click.option("--testbed", is_flag=True, help="Measure on the emulated testbed that is up (`ddlbench testbed up`).")
@click.option("--schemes", default="all", show_default=True, help="Methods to consider, comma-separated, or all.")
@click.option("--grid", type=click.Choice(["full", "default"]), default="full", show_default=True,
              help="Each method over its declared knob grid, or at its default knobs only.")
@click.option("--top-k", default=6, show_default=True, type=int,
              help="Best predicted candidates to measure (DDP with default knobs is measured besides).")
@click.option("--iters", default=20, show_default=True, type=int, help="Measured iterations of a first try.")
@click.option("--max-iters", default=200, show_default=True, type=int, help="Bound on the iterations of one try.")
@click.option("--target-ci", default=0.03, show_default=True, type=float,
              help="Wanted half width of the 95% CI of the mean iteration time, relative.")
@click.option("--rounds", default=3, show_default=True, type=int,
              help="Alternated rounds of the best two when their CIs overlap (0 = none).")
@click.option("--warmup", default=5, show_default=True, type=int, help="Discarded iterations per cell.")
@click.option("--batch", type=int, help="Per-worker batch (default: the workload's).")
@click.option("--seq-len", type=int, help="Sequence length (default: the workload's).")
@click.option("--device", default="auto", show_default=True, help="cpu | cuda | auto.")
@click.option("--timeout", "timeout_s", default=600.0, show_default=True, type=float, help="Cell time limit, s.")
@click.option("--profile", type=click.Path(dir_okay=False, path_type=Path),
              help="Stored profile (`ddlbench profile`) instead of measuring one.")
@click.option("--commbench", multiple=True, type=click.Path(path_type=Path),
              help="Stored commbench run(s) measured on this placement instead of measuring the network.")
@click.option("--network", help="A network preset (`ddlbench predict --network`) instead of measuring it.")
@click.option("--output", type=click.Path(path_type=Path), help="Run directory (default results/<run-id>).")
@click.option("--resume", is_flag=True, help="Go on with the advise run in --output: measure only what is missing.")
@click.option("--oversubscribe", is_flag=True, help="Allow more workers than cores (timings are then noise).")
@click.option("--no-progress", is_flag=True, help="No progress bars.")
def command(workload, workers, servers, testbed, schemes, grid, top_k, iters, max_iters, target_ci, rounds, warmup,
            batch, seq_len, device, timeout_s, profile, commbench, network, output, resume, oversubscribe, no_progress):
    """Recommend a method and knobs for WORKLOAD here: predict every candidate, measure the best few and DDP.

    Prints the recommendation (gain over DDP default with its 95% CI, or a statistical tie) and writes
    RUN/advise/report.md. Exit status 0, 2 on bad input."""
    if not 0 < target_ci < 1 or rounds < 0:
        raise UserError("--target-ci must be between 0 and 1 (0.03 = 3%) and --rounds >= 0; fix the option")
    if network and commbench:
        raise UserError("--network and --commbench both describe the network: give one")
    run_dir, line = run_advise(
        workload, workers, output=output, resume=resume, testbed=testbed, servers=servers, schemes=schemes,
        full_grid=grid == "full", top_k=top_k, policy=Policy(iters, max_iters, target_ci, rounds), warmup=warmup,
        batch=batch, seq_len=seq_len, device=device, timeout_s=timeout_s, profile=profile, commbench=commbench,
        network=network, oversubscribe=oversubscribe, progress=not no_progress)
    click.echo((run_dir / "advise" / "report.md").read_text())
    click.echo(line)
    click.echo(f"report: {run_dir / 'advise' / 'report.md'}")
