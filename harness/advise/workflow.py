"""`ddlbench advise` (harness/cli/commands/advise.py): which method and knobs to use for this workload on this
placement, with evidence.

    ddlbench advise --workload bert-base-tiny --workers 2                   # this box
    ddlbench advise --workload mypkg.models:build --workers 2 --testbed     # the emulated hosts that are up
    ddlbench advise --workload bert-base --workers 16                        # inside a Slurm allocation

Profile the model and measure the network (or take stored ones), predict every method over the knob grid
declared beside its knobs (harness/advise/candidates.py), measure the best predicted few plus DDP with
its default knobs as ordinary cells of an ordinary run directory (through `ddlbench sweep`'s own
function: one sweep file per candidate and try, kept under RUN/advise/sweeps/), re-measure the best two in
alternated rounds when their CIs overlap, and write RUN/advise/report.md. All of it within --budget
(harness/advise/budget.py): DDP default and the best predicted measured first, each try sized to the time
left, and when the time is spent the answer with the confidence reached and what was left out.
Resumable: run it again with --resume and the same options, and it measures only what is missing (the
time the earlier invocations spent counts against the budget).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import time
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import torch
import yaml

from harness import backends
from harness.advise.budget import DEFAULT_BUDGET, Budget, Outcome, Pace, parse_duration
from harness.advise.candidates import Candidate, Layout, candidates, reference, shortlist, sweep_mapping
from harness.advise.observed import commbench_table, profile_table
from harness.advise.predicted import measured_network, predict_candidates, preset_network
from harness.advise.recommend import recommend
from harness.advise.report import render
from harness.advise.runner import counting, keep_spent, spent_before, sweep_runner
from harness.advise.shortlist import Measuring, Policy, alternated_rounds, frame, measure_all
from harness.commbench.driver import testbed_or_here
from harness.contracts.cell import per_worker_node
from harness.contracts.launcher import Launcher
from harness.core.atomic import write_text_atomic
from harness.core.errors import UserError, signals_raise
from harness.predict.calibration import require_converged
from harness.predict.compute import compute_model
from harness.predict.own_calibration import calibrate_stacks, server_share
from harness.results.files import check_output_dir
from harness.results.paths import default_run_dir
from harness.results.store import holds_run
from harness.schemes import SCHEMES
from harness.sim.links import get_link
from harness.testbed import netns
from workloads import WORKLOADS


@dataclass(frozen=True)
class AdviseSpec:
    """Everything `ddlbench advise` is asked (its options, harness/cli/commands/advise.py)."""

    workload: str
    """Workload name, or your own as package.module:function."""
    workers: int
    """Worker processes (>= 2)."""
    output: Path | None = None
    """Run directory (default results/<run-id>)."""
    resume: bool = False
    """Go on with the advise run in `output`: measure only what is missing."""
    testbed: bool = False
    """Measure on the emulated testbed that is up."""
    servers: int = 0
    """Parameter-server processes of a PS cell (0: one per worker node); PS candidates try 1..N of them."""
    schemes: str = "all"
    """Methods to consider, comma-separated, or all."""
    full_grid: bool = True
    """Each method over its declared knob grid (False: at its default knobs only)."""
    top_k: int = 6
    """Best predicted candidates to measure (DDP with default knobs is measured besides)."""
    policy: Policy = Policy()
    """How long each candidate is measured, and the alternated rounds of the best two."""
    warmup: int = 5
    """Discarded iterations per cell."""
    batch: int | None = None
    """Per-worker batch (None: the workload's)."""
    seq_len: int | None = None
    """Sequence length (None: the workload's)."""
    device: str = "auto"
    """cpu | cuda | auto."""
    timeout_s: float = 600.0
    """Cell time limit, seconds."""
    budget_s: float = parse_duration(DEFAULT_BUDGET)
    """Time advise may take in all, seconds (`--budget`; math.inf: no budget)."""
    profile: Path | None = None
    """Stored profile (`ddlbench profile`) instead of measuring one."""
    commbench: tuple = ()
    """Stored commbench run(s) measured on this placement instead of measuring the network."""
    link: str | None = None
    """A link preset between the hosts (`ddlbench predict --link`) instead of measuring the network."""
    calibrate: tuple = ()
    """Run directories of `ddlbench sweep` (one node, then optionally two) that calibrate ddlbench's own stacks
    before the candidates are predicted (harness/predict/own_calibration.py); () = the stacks as the model states
    them."""
    oversubscribe: bool = False
    """Allow more workers than cores (timings are then noise)."""
    progress: bool = True
    """Progress bars."""


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
    """What starts the network's measurement across hosts (the testbed's launcher, srun in an allocation); None:
    here."""


def where(workers: int, servers: int, testbed: bool) -> Where:
    """The place advise measures on, from its launcher (harness/commbench/driver.testbed_or_here: the testbed's
    when asked, else the environment's)."""
    launch = testbed_or_here(testbed)
    nodes, hosts = launch.nodes_for(workers), launch.hosts
    layout = Layout(workers, nodes, per_worker_node(servers, nodes), max(0, hosts - nodes))
    if testbed:  # its one network: the testbed that is up, as it is
        net = launch.networks[0]
        return Where(
            layout,
            f"the emulated testbed ({hosts} hosts at {net.label})",
            {"testbed": {"hosts": hosts, "rate": f"{net.rate_mbit:g}mbit"}},
            shaped=True,
            launcher=launch,
        )
    if launch.run_module is not None:  # an allocation whose nodes the network's measurement spans (srun)
        return Where(layout, f"Slurm allocation ({hosts} nodes)", {}, shared_cores=False, launcher=launch)
    return Where(Layout(workers, 1, per_worker_node(servers, 1), 0), "this box", {})


def predictions(
    workload,
    batch,
    seq_len,
    device,
    place: Where,
    methods,
    full_grid,
    profile,
    commbench,
    link,
    keep: Path,
    calibrate: tuple = (),
) -> tuple[pd.DataFrame, dict, str]:
    """(predicted table, skipped methods, a line on the inputs)."""
    usable = {name: entry.available() is None for name, entry in backends.load().items()}
    cands, skipped = candidates(methods, place.layout, usable, full_grid)
    if not any(c.is_reference for c in cands):
        cands.append(reference())
    concurrent = place.layout.workers if place.shared_cores and device == "cpu" else 1
    prof = profile_table(workload, batch, seq_len, device, concurrent, profile, keep / "profile.parquet")
    if link:
        net = preset_network(link)
        how = f"link preset {link}"
    else:
        pushpull = any(c.servers for c in cands)
        cb = commbench_table(place.layout, device, pushpull, commbench, keep / "commbench.parquet", place.launcher)
        net = measured_network(cb, place.layout, place.shaped, "measured")
        how = f"network measured (all-reduce{' and push-pull' if pushpull else ''}, commbench)"
    extra = None
    if calibrate:  # ddlbench's own stacks as the runs calibrated them, on the network as measured or given
        own = calibrate_stacks(tuple(calibrate), {str(prof["workload"].iloc[0]): prof})
        require_converged(own, " ".join(map(str, calibrate)), "check the runs' cells or drop --calibrate")
        net = dataclasses.replace(net, stacks=own.stacks())
        cores = own.shared_cores() if place.shared_cores else 0

        def extra(c: Candidate) -> dict:  # a server sharing this machine's cores gets its share of one
            share = server_share(cores, place.layout.workers, c.servers) if c.servers else 1.0
            return own.knobs([c.scheme], share=share)

        fitted = "; ".join(
            f"{r.parameter} = {r.value:.3g} {r.unit}".rstrip() for r in own.table().itertuples() if r.determined
        )
        how += f"; ddlbench's stacks calibrated from {' '.join(map(str, calibrate))} ({fitted})"
    pred = predict_candidates(cands, compute_model(prof), net, place.layout, extra)
    return pred, skipped, f"profile of {len(prof)} tensors ({'given' if profile else 'measured here'}); {how}"


def run_advise(spec: AdviseSpec) -> tuple[Path, str]:
    """Everything `ddlbench advise` does; returns (run directory, the recommendation line). SIGTERM or SIGINT
    raise Interrupted naming the run directory: the same spec with `resume` goes on with it."""
    t0 = time.monotonic()
    device, methods = _check(spec)
    run_dir = spec.output or default_run_dir("advise")
    check_output_dir(run_dir)
    if holds_run(run_dir) and not spec.resume:
        raise UserError(f"{run_dir} already holds a run: add --resume to go on with it, or give another --output")
    keep, policy = run_dir / "advise", spec.policy
    budget = Budget(spec.budget_s, spent_before_s=spent_before(keep) if spec.resume else 0.0)
    lease = netns.lease(f"ddlbench advise {spec.workload}") if spec.testbed else contextlib.nullcontext()
    with lease, signals_raise(run_dir):
        place = where(spec.workers, spec.servers, spec.testbed)
        pred, skipped, inputs = predictions(
            spec.workload,
            spec.batch,
            spec.seq_len,
            device,
            place,
            methods,
            spec.full_grid,
            spec.profile,
            spec.commbench,
            spec.link,
            keep,
            spec.calibrate,
        )
        keep.mkdir(parents=True, exist_ok=True)
        pred.to_csv(keep / "predicted.csv", index=False)
        base = {
            "workloads": [spec.workload],
            "workers": [spec.workers],
            "warmup": spec.warmup,
            "device": device,
            "timeout_s": spec.timeout_s,
            **({"batch": spec.batch} if spec.batch else {}),
            **({"seq_len": spec.seq_len} if spec.seq_len else {}),
            **place.sweep,
        }
        run = counting(sweep_runner(base, keep / "sweeps", spec.progress, spec.oversubscribe), budget, keep)
        by_label = {c.label: c for c in _all(pred)}
        short = shortlist(
            [by_label[label] for label in pred["label"]],
            spec.top_k,
            list(pred["pred_iter_s"]),
            same_within=policy.target,
        )
        ms = Measuring(
            run,
            run_dir,
            policy,
            budget,
            Pace(spec.warmup),
            dict(zip(pred["label"], pred["pred_iter_s"])),
            Outcome(spec.budget_s),
        )
        measured = measure_all(short, ms)
        rec, _verdict = _decide(measured, ms, keep, policy)
        ms.outcome.used_s = budget.used_s()
        keep_spent(keep, budget)
    meas = frame(measured)
    meas.to_csv(keep / "measured.csv", index=False)
    winner = sweep_mapping(rec.winner.candidate, base, int(rec.winner.row["iters"]), "advise-winner")
    write_text_atomic(keep / "winner.yaml", yaml.safe_dump(winner, sort_keys=False))
    context = {
        "workload": spec.workload,
        "placement": f"{spec.workers} workers on {place.layout.nodes} host(s), {place.label}",
        "inputs": inputs,
        "candidates": f"{len(pred)} predicted, {len(short)} shortlisted, {len(measured)} measured "
        f"({len(measured) / len(pred):.0%}); a knob "
        f"variant predicted within {policy.target:.0%} of a measured variant of its method "
        f"is not measured (the model cannot tell them apart)",
        "target": f"95% CI of the mean within {policy.target:.0%}, {policy.iters}-{policy.max_iters} iterations",
        "time": ms.outcome.line(),
        "wall time": f"{time.monotonic() - t0:.0f} s (this invocation)",
    }
    text = render(rec, pred, meas, context, skipped, winner, str(keep / "winner.yaml"), str(run_dir))
    write_text_atomic(keep / "report.md", text)
    write_text_atomic(
        keep / "recommendation.json",
        json.dumps(
            {
                "winner": rec.winner.candidate.label,
                "cell_id": rec.winner.cell_ids[-1],
                "tied": rec.tied,
                "gain": rec.gain,
                "line": rec.line(),
                "budget": {
                    "budget_s": spec.budget_s,
                    "used_s": ms.outcome.used_s,
                    "ended": ms.outcome.ended,
                    "not_measured": ms.outcome.not_measured,
                    "cut_short": ms.outcome.cut_short,
                    "rounds_run": ms.outcome.rounds_run,
                    "rounds_skipped": ms.outcome.rounds_skipped,
                },
            },
            indent=1,
            default=str,
        ),
    )
    return run_dir, rec.line()


def _check(spec: AdviseSpec) -> tuple[str, list[str]]:
    """Everything advise is asked, checked before anything is measured; returns (device, methods)."""
    WORKLOADS.get(spec.workload)
    policy = spec.policy
    if spec.workers < 2 or spec.top_k < 1 or spec.servers < 0 or policy.iters < 2 or policy.max_iters < policy.iters:
        raise UserError("advise needs --workers >= 2, --top-k >= 1, --servers >= 1 and 2 <= --iters <= --max-iters")
    if not spec.budget_s > 0:
        raise UserError("--budget must be a positive duration, e.g. 10m; fix the option")
    if not 0 < policy.target < 1 or policy.rounds < 0:
        raise UserError("--target-ci must be between 0 and 1 (0.03 = 3%) and --rounds >= 0; fix the option")
    if spec.link and spec.commbench:
        raise UserError("--link and --commbench both describe the network: give one")
    device = spec.device if spec.device != "auto" else ("cuda" if torch.cuda.is_available() else "cpu")
    methods = (
        [n for n in SCHEMES if n != "local"] if spec.schemes == "all" else [s.strip() for s in spec.schemes.split(",")]
    )
    for m in methods:
        SCHEMES.get(m)
    _check_inputs(spec.profile, spec.commbench, spec.link)
    _check_one_place(spec.testbed)
    return device, methods


def _check_inputs(profile: Path | None, commbench: tuple, link: str | None) -> None:
    """Stored inputs and the preset checked before anything is measured."""
    if link:
        get_link(link)
    for path, make in [(profile, "ddlbench profile WORKLOAD -o FILE")] + [
        (c, "ddlbench commbench --output DIR") for c in commbench
    ]:
        if path is not None and not Path(path).exists():
            raise UserError(
                f"{path} does not exist: make it with `{make}`, or leave the option out and advise measures it"
            )


def _check_one_place(testbed: bool) -> None:
    """advise measures on this box, the testbed or across a Slurm allocation (a launcher that runs the
    network's measurement across its nodes); a node of a multi-node job that cannot (a node list without
    Slurm: Kubeflow, SkyPilot) would measure itself alone and recommend for a placement it does not have."""
    if testbed:
        return
    launch = testbed_or_here(testbed=False)
    if launch.hosts > 1 and launch.run_module is None:
        raise UserError(
            f"advise does not span the nodes of a multi-node job without Slurm "
            f"({launch.env_extra.get('hosts', launch.name)}) "
            f"and would measure this node alone; run it on one node with the scheduler's variables unset, "
            f"then measure its picks across the nodes with `ddlbench sweep RUN/advise/winner.yaml` on "
            f"every node"
        )


def _all(pred: pd.DataFrame) -> list[Candidate]:
    return [
        Candidate(r.scheme, r.backend, json.loads(r.knobs_json), int(r.servers), r.server_hosts)
        for r in pred.itertuples()
    ]


def _decide(measured, ms: Measuring, keep: Path, policy: Policy):
    """The recommendation, after alternated rounds of the best two when their CIs overlap (while they fit
    in the budget)."""
    first = recommend(measured)
    verdict = None
    if first.runner_up is not None and policy.rounds and first.winner.estimate.overlaps(first.runner_up.estimate):
        verdict = alternated_rounds(first.winner, first.runner_up, ms, keep / "rounds", policy.rounds)
    return recommend(measured, verdict, ms.outcome), verdict
