"""`ddlbench advise` (issue 25): the pure parts (knob grids, candidates, the measuring and deciding rules)
and two real runs on this box: the acceptance run on bert-base-tiny, and a candidate slowed by an
injected fault (DDLBENCH_FAULT=slow:...) that must not be recommended.

    pytest -q tests/integration/processes/test_advise.py -m "not slow"    # a second
    pytest -q tests/integration/processes/test_advise.py                  # ~3-4 min on 2 cores
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from harness.advise import validation as av
from harness.advise.candidates import (
    Candidate,
    Layout,
    candidates,
    reference,
    shortlist,
    sweep_mapping,
)
from harness.advise.decide import (
    Estimate,
    gain,
    next_iters,
    paired_verdict,
    rel_half_width,
)
from harness.cli.main import cli
from harness.experiment.sweep import expand, sweep_from_dict
from harness.schemes import SCHEMES

USABLE = {"torch": True, "horovod": True, "deepspeed": True, "byteps": False}


def test_each_grid_starts_at_the_defaults_and_holds_resolved_values():
    ddp = SCHEMES.get("ddp").knob_class
    grid = ddp.grid()
    assert grid[0] == ddp.resolve({}, "ddp").as_dict()
    assert sorted(g["bucket_cap_mb"] for g in grid) == [1.0, 5.0, 25.0, 100.0]
    assert all(isinstance(g["bucket_cap_mb"], float) for g in grid)
    assert len(SCHEMES.get("bytescheduler-a2a").knob_class.grid()) == 9
    assert SCHEMES.get("bsp-a2a").knob_class.grid() == [{}]
    assert SCHEMES.get("ddp").knobs["bucket_cap_mb"].grid == (1, 5, 25, 100)


def test_candidates_cover_grids_servers_and_placements_and_say_what_is_left_out():
    cands, skipped = candidates(["ddp", "bsp-ps", "zero2", "byteps", "horovod"], Layout(2, 2, 2, 1), USABLE)
    labels = [c.label for c in cands]
    assert len(labels) == len(set(labels)), "labels must be unique"
    assert sum(c.scheme == "ddp" for c in cands) == 4
    ps = [c for c in cands if c.scheme == "bsp-ps"]
    assert len(ps) == 3 * 2 * 2  # partitions x servers 1..2 x colocated/dedicated
    assert {(c.servers, c.server_hosts) for c in ps} == {
        (1, "colocated"),
        (2, "colocated"),
        (1, "dedicated"),
        (2, "dedicated"),
    }
    assert "zero2" in skipped and "simulation model" in skipped["zero2"]
    assert "byteps" in skipped
    assert {c.backend for c in cands if c.scheme == "horovod"} == {"horovod"}
    every, _ = candidates([n for n in SCHEMES if n != "local"], Layout(2, 2, 2, 1), USABLE)
    for c in every:  # the label survives the trip through predicted.csv (JSON sorts the knobs)
        again = Candidate(c.scheme, c.backend, json.loads(c.knobs_json), c.servers, c.server_hosts)
        assert again.label == c.label and again == c
    one_box, _ = candidates(["bsp-ps"], Layout(2, 1, 1, 0), USABLE, full_grid=False)
    assert [(c.servers, c.server_hosts) for c in one_box] == [(1, "colocated")]


def test_the_shortlist_is_the_top_k_plus_ddp_default():
    ref = reference()
    others = [
        Candidate("bsp-a2a", "torch"),
        Candidate("wfbp-a2a", "torch"),
        Candidate("mgwfbp", "torch", SCHEMES.get("mgwfbp").knob_class.grid()[0]),
    ]
    assert shortlist([*others, ref], 2) == [*others[:2], ref]
    assert shortlist([ref, *others], 2) == [ref, others[0]]
    assert ref.is_reference and ref.label == "ddp"
    assert not Candidate("ddp", "torch", {**ref.knobs, "bucket_cap_mb": 5.0}).is_reference


def test_the_shortlist_passes_over_variants_the_model_cannot_tell_apart():
    """Six parameter-server variants predicted alike are one measurement; a DDP variant predicted as DDP
    default is the reference's; a variant predicted 5% apart is its own; the reference is always there."""
    ref = reference()
    ps = [
        Candidate("bytescheduler-ps", "torch", {"partition_mb": p, "credit_mb": c}, 1, "colocated")
        for p in (1.0, 4.0, 16.0)
        for c in (4.0, 64.0)
    ]
    mg = [Candidate("mgwfbp", "torch", {"alpha_s": None}), Candidate("mgwfbp", "torch", {"alpha_s": 0.01})]
    ddp1 = Candidate("ddp", "torch", {**ref.knobs, "bucket_cap_mb": 1.0})
    dear = Candidate("dear", "torch")
    ranked = [*ps, mg[0], ddp1, ref, mg[1], dear]
    times = [0.1268] * 6 + [0.1269, 0.1283, 0.1283, 0.1343, 0.1339]
    assert shortlist(ranked, 4, times, same_within=0.03) == [ps[0], mg[0], ref, mg[1]]  # DDP default counts
    assert shortlist(ranked, 5, times, same_within=0.03) == [ps[0], mg[0], ref, mg[1], dear]
    assert shortlist(ranked, 4) == [*ranked[:4], ref]  # without predictions: the plain top k


def test_a_candidates_sweep_file_expands_to_exactly_its_cell():
    c = Candidate("bytescheduler-a2a", "torch", {"partition_mb": 1.0, "credit_mb": 64.0})
    base = {"workloads": ["bert-base-tiny"], "workers": [2], "warmup": 1, "device": "cpu"}
    cells = expand(sweep_from_dict(sweep_mapping(c, base, 12, "advise")))
    assert len(cells) == 1
    assert cells[0].knobs == c.knobs and cells[0].iters == 12 and cells[0].workers == 2
    ps = Candidate("bsp-ps", "torch", {"partition_mb": 4.0, "local_reduce": 1}, 2, "colocated")
    (cell,) = expand(sweep_from_dict(sweep_mapping(ps, base, 10, "advise")))
    assert (cell.servers, cell.server_hosts) == (2, "colocated")


def test_iterations_grow_until_the_ci_is_narrow_enough_and_stop_at_the_bound():
    assert next_iters(20, 0.02, 0.03, 200) is None
    assert next_iters(20, 0.06, 0.03, 200) == 96  # 20 * 4 * 1.2
    assert next_iters(20, 0.031, 0.03, 200) == 30  # at least 1.5 n
    assert next_iters(20, 0.5, 0.03, 200) == 200
    assert next_iters(200, 0.5, 0.03, 200) is None
    rng = np.random.default_rng(0)
    x = rng.normal(1.0, 0.1, 400)
    assert math.isclose(rel_half_width(x), 1.966 * 0.1 / 20, rel_tol=0.15)
    assert rel_half_width([1.0]) == math.inf


def test_paired_rounds_tell_a_real_difference_from_a_tie():
    clear = paired_verdict([1.00, 1.02, 0.99, 1.01], [1.10, 1.12, 1.09, 1.11])
    assert clear.winner == 0 and not clear.tied and 1.08 < clear.ratio < 1.12
    flipped = paired_verdict([1.10, 1.12, 1.09, 1.11], [1.00, 1.02, 0.99, 1.01])
    assert flipped.winner == 1 and not flipped.tied
    tie = paired_verdict([1.00, 1.05, 0.97, 1.02], [1.02, 0.99, 1.01, 1.04])
    assert tie.tied and tie.low <= 1 <= tie.high


def test_gain_over_the_reference_is_a_ratio_of_means_with_its_ci():
    best, ref = Estimate(1.0, 0.98, 1.02, 30), Estimate(1.2, 1.17, 1.23, 30)
    g, lo, hi = gain(best, ref)
    assert math.isclose(g, 0.2) and lo < g < hi and lo > 0.1
    assert Estimate(1.0, 0.9, 1.1, 5).overlaps(Estimate(1.05, 1.0, 1.1, 5))
    assert not best.overlaps(ref)


def _advise(tmp_path, *extra):
    out = tmp_path / "adv"
    res = CliRunner().invoke(
        cli,
        [
            "advise",
            "--workload",
            "bert-base-tiny",
            "--workers",
            "2",
            "--batch",
            "4",
            "--seq-len",
            "32",
            "--grid",
            "default",
            "--iters",
            "8",
            "--max-iters",
            "12",  # one longer try (8 -> 12) where the CI is wide: the growth is exercised, not paid three times over
            "--warmup",
            "2",
            "--rounds",
            "2",
            "--output",
            str(out),
            "--no-progress",
            *extra,
        ],
    )
    assert res.exit_code == 0, res.output[-3000:]
    return out, res.output


@pytest.mark.slow
def test_advise_on_this_box_recommends_with_evidence_and_resumes(tmp_path):
    """The acceptance run (grid and iterations kept small for CI): profile, commbench, predictions of
    every candidate, the top 2 and DDP measured as ordinary cells, a recommendation, a report."""
    out, printed = _advise(tmp_path, "--schemes", "ddp,bsp-a2a,wfbp-a2a,mgwfbp,bsp-ps", "--top-k", "2")
    assert "recommended: " in printed and "report: " in printed
    pred = pd.read_csv(out / "advise" / "predicted.csv")
    assert set(pred["scheme"]) == {"ddp", "bsp-a2a", "wfbp-a2a", "mgwfbp", "bsp-ps"}
    meas = pd.read_csv(out / "advise" / "measured.csv")
    assert 2 <= len(meas) <= 3 and "ddp" in set(meas["label"])
    summary = pd.read_parquet(out / "summary.parquet")
    assert set(meas["cell_id"]) <= set(summary["cell_id"]) and (summary["status"] == "ok").all()
    report = (out / "advise" / "report.md").read_text()
    for words in ("predicted vs measured", "Why the winner wins", "Predicted ranking", "Reproduce the winner"):
        assert words in report
    rec = json.loads((out / "advise" / "recommendation.json").read_text())
    assert rec["cell_id"] in set(summary["cell_id"])
    before = len(summary)
    _, again = _advise(tmp_path, "--schemes", "ddp,bsp-a2a,wfbp-a2a,mgwfbp,bsp-ps", "--top-k", "2", "--resume")
    assert len(pd.read_parquet(out / "summary.parquet")) == before, "a resumed advise measured again"
    assert rec["line"].split("; budget 10m")[0] in again
    assert not rec["budget"]["ended"] and "budget 10m, used " in rec["line"]
    again_rec = json.loads((out / "advise" / "recommendation.json").read_text())
    assert again_rec["budget"]["used_s"] >= rec["budget"]["used_s"], "the time spent before the resume counts"


@pytest.mark.slow
def test_a_budget_too_small_for_the_shortlist_still_answers_and_says_what_it_left_out(tmp_path):
    """--budget 1s: the profile and the network are measured, then DDP default alone (advise answers from
    one measurement at least), and the answer says the budget ended and what was not measured."""
    out, printed = _advise(tmp_path, "--schemes", "ddp,bsp-a2a,wfbp-a2a", "--top-k", "2", "--budget", "1s")
    meas = pd.read_csv(out / "advise" / "measured.csv")
    assert list(meas["label"]) == ["ddp"] and (meas["iters"] == 5).all()
    rec = json.loads((out / "advise" / "recommendation.json").read_text())
    assert rec["budget"]["ended"] and rec["budget"]["budget_s"] == 1 and rec["budget"]["not_measured"]
    assert "ddp" not in rec["budget"]["not_measured"]
    assert (
        "recommended: ddp" in printed
        and "budget 1s, used " in printed
        and "the budget ended (not measured: " in printed
    )


@pytest.mark.slow
def test_a_candidate_slowed_by_an_injected_fault_is_not_recommended(tmp_path, monkeypatch):
    """wfbp-a2a's rank 0 sleeps 0.3 s in every iteration: measured, and not recommended."""
    monkeypatch.setenv("DDLBENCH_FAULT", "slow:0:0.3:wfbp-a2a")
    # one try each (--max-iters = --iters): 8 iterations tell 0.3 s of sleep from none
    out, printed = _advise(tmp_path, "--schemes", "ddp,wfbp-a2a", "--top-k", "2", "--rounds", "0", "--max-iters", "8")
    meas = pd.read_csv(out / "advise" / "measured.csv").set_index("label")
    assert {"ddp", "wfbp-a2a"} <= set(meas.index)
    assert meas.loc["wfbp-a2a", "iter_s_mean"] > meas.loc["ddp", "iter_s_mean"] + 0.2
    rec = json.loads((out / "advise" / "recommendation.json").read_text())
    assert rec["winner"] != "wfbp-a2a"
    assert "recommended: ddp" in printed


def test_a_node_of_a_multi_node_job_without_slurm_is_refused_in_one_line(tmp_path, monkeypatch):
    """On a Kubeflow pod (PET_*) advise would measure its own node alone: refused before anything runs."""
    for k, v in {
        "PET_NNODES": "2",
        "PET_NODE_RANK": "0",
        "PET_NPROC_PER_NODE": "1",
        "PET_MASTER_ADDR": "10.0.0.1",
        "PET_MASTER_PORT": "29400",
    }.items():
        monkeypatch.setenv(k, v)
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    res = CliRunner().invoke(cli, ["advise", "--workload", "bert-base-tiny", "--output", str(tmp_path / "a")])
    assert res.exit_code == 2 and len(res.stderr.strip().splitlines()) == 1, res.output
    assert "does not span the nodes of a multi-node job without Slurm" in res.stderr and "2 nodes" in res.stderr
    assert not (tmp_path / "a").exists()


def test_the_validation_sweeps_hold_exactly_advises_grid():
    """The advise validation's (harness/advise/validation.py) exhaustive sweep expands to the same configurations advise
    predicts."""
    cfg = sweep_from_dict(av.exhaustive_sweep("bert-base-tiny", 2, av.METHODS, True, 20, av.RATES, box=True))
    swept = sorted((c.scheme, json.dumps(c.knobs, sort_keys=True), c.servers) for c in expand(cfg))
    cands, _ = candidates(av.METHODS, Layout(2, 1, 1, 0), USABLE)
    assert swept == sorted((c.scheme, c.knobs_json, c.servers) for c in cands)
    assert len(swept) == 39


def test_the_regret_row_compares_both_picks_as_measured_in_the_exhaustive_run():
    # (scheme, knobs, mean iteration s, mean of per-iteration throughputs): bytescheduler-a2a's iterations
    # vary, so the mean of their throughputs ranks it first although it sustains the least
    rows = [
        ("ddp", '{"bucket_cap_mb": 25.0}', 0.16, 101.0),
        ("ddp", '{"bucket_cap_mb": 5.0}', 16 / 110, 111.0),
        ("bsp-a2a", "{}", 16 / 90, 91.0),
        ("bytescheduler-a2a", "{}", 0.2, 130.0),
        ("wfbp-a2a", "{}", float("nan"), float("nan")),
    ]
    ex = pd.DataFrame(
        [
            {
                "scheme": s,
                "backend": "torch",
                "knobs_json": k,
                "servers": 0,
                "server_hosts": "",
                "global_batch": 16,
                "iter_s_mean": t,
                "throughput_mean": x,
                "wall_s": 30.0,
                "status": "ok" if x == x else "failed",
                "network": "emulated-200mbit",
            }
            for s, k, t, x in rows
        ]
    )
    s = av.Setting("bert-base-tiny", 2, "200mbit")
    r = av.regret_row(
        s, ex, {"label": "ddp", "scheme": "ddp", "servers": 0, "knobs_json": '{"bucket_cap_mb": 25.0}'}, 3, 100.0
    )
    assert math.isclose(r["regret"], 1 - 100 / 110) and r["grid"] == 5 and r["share_measured"] == 0.6
    assert r["exhaustive_best"] == "ddp bucket_cap_mb=5" and r["exhaustive_wall_s"] == 120.0


@pytest.mark.root
@pytest.mark.slow
def test_advise_on_the_testbed_runs_its_cells_on_the_emulated_hosts(clean_machine, tmp_path):
    """`ddlbench advise --testbed`: the network measured between the hosts, every measured cell an ordinary
    testbed cell (2 hosts, the emulated network's label), a recommendation (about 6 minutes here)."""
    from harness.testbed import netns

    netns.up(2, "2gbit")
    out, printed = _advise(tmp_path, "--testbed", "--schemes", "ddp,bsp-a2a,bsp-ps", "--top-k", "2")
    assert "recommended: " in printed and "the emulated testbed (2 hosts at emulated-2gbit)" in printed
    summary = pd.read_parquet(out / "summary.parquet")
    assert (summary["status"] == "ok").all() and (summary["network"] == "emulated-2gbit").all()
    assert (summary["nodes"] == 2).all()
    cb = pd.read_parquet(out / "advise" / "commbench.parquet")
    assert set(cb["collective"]) == {"allreduce", "pushpull"}


@pytest.mark.slow
def test_advise_calibrated_from_a_one_node_run_ranks_with_the_fitted_stacks_and_names_them(tmp_path):
    """--calibrate RUN (the testbed check's one-node run): the candidates are predicted with ddlbench's own stacks
    as that run calibrated them, the report names the fitted parameters, and the budget still ends the run."""
    run = Path(__file__).resolve().parents[3] / "reports" / "own-calibration" / "inputs" / "S1"
    out, printed = _advise(
        tmp_path, "--schemes", "ddp,bsp-a2a,wfbp-a2a", "--top-k", "2", "--budget", "1s", "--calibrate", str(run)
    )
    report = (out / "advise" / "report.md").read_text()
    assert "ddlbench's stacks calibrated from" in report and "launch_s = " in report
    rec = json.loads((out / "advise" / "recommendation.json").read_text())
    assert rec["budget"]["ended"] and "recommended: " in printed
    pred = pd.read_csv(out / "advise" / "predicted.csv")
    assert set(pred["scheme"]) == {"ddp", "bsp-a2a", "wfbp-a2a"} and (pred["pred_iter_s"] > 0).all()
