"""The study's software costs calibrated from one node (harness/study/calibration.py, fitting.py): a table
made by the model from known parameters is fitted back inside the stated intervals; a table missing a method or a
workload is refused in one line naming it (exit 2); a fit that cannot reproduce its cells says so and predicts
nothing; `ddlbench predict --calibrate` predicts the cluster from the fitted values.

    pytest -q tests/unit/predict/test_study_calibration.py
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from harness.cli.main import cli
from harness.core.errors import UserError
from harness.predict.fitting import Block, Cells, Param, fit_params
from harness.predict.predictor import SEVEN_METHODS
from harness.study import calibration as sc
from harness.study.inputs import INPUTS

ROOT = Path(__file__).resolve().parents[3]
PROFILES = ROOT / "reports" / "study-prediction" / "profiles"
NETWORKS = ("eth-10g", "ib-100g", "ipoib-100g")
TRUTH = {  # a cluster unlike the sourced nominal one, each value inside its search bounds
    "calib_adam_share": 0.0,
    "shm_edge_gbyte_s": 6.0,
    "host_path_gbyte_s": 40.0,
    "py_op_s": 30e-6,
    "d2d_gbyte_s": 350.0,
    "overlap_compute_slowdown": 0.05,
    "overlap_comm_slowdown": 0.4,
    "byteps_nccl_edge_gbyte_s": 4.5,
    "bs_partition_cpu_s": 500e-6,
    "gil_convoy_share": 0.2,
    "bs_fwd_gap_s": 0.8e-3,
}


def _study_table() -> pd.DataFrame:
    return sc.read_one_node(sc.STUDY_TABLE)


def synthetic_table(values: dict) -> pd.DataFrame:
    """The one-node table the model itself gives at `values`: the study's single-GPU rows, every method at 4 GPUs
    under each network with a 1% std."""
    base = _study_table()
    singles = base[base["gpus"] == 1]
    models = sc.calibration_models(base, list(sc.WORKLOADS), PROFILES)
    keys = [(w, n, m) for w in sc.WORKLOADS for n in NETWORKS for m in SEVEN_METHODS]
    got = sc.OneNode(models)({**INPUTS.nominal(), **values}, keys)
    batch = dict(zip(singles["workload"], singles["batch"]))
    rows = [
        {
            "workload": w,
            "batch": batch[w],
            "network": n,
            "scheme": m,
            "gpus": 4,
            "throughput": got[(w, n, m)],
            "std": 0.01 * got[(w, n, m)],
        }
        for w, n, m in keys
    ]
    return pd.concat([singles, pd.DataFrame(rows)], ignore_index=True)


def test_a_table_made_from_known_parameters_is_fitted_back_inside_the_stated_intervals():
    table = synthetic_table(TRUTH)
    cal = sc.calibrate(table, PROFILES, lowo=False)
    assert cal.fit.converged, cal.fit.message
    assert cal.adam_share == TRUTH["calib_adam_share"]  # the model selection picks the optimizer that made it
    t = cal.table().set_index("parameter")
    assert set(t.index) == {p.name for ps in sc.PARAMS.values() for p in ps}
    for name, row in t.iterrows():
        truth = TRUTH[name]
        if row["determined"]:
            # inside the 10th-90th percentile interval, or within 3% of it where the interval is that narrow
            assert row["low"] * 0.97 <= truth <= row["high"] * 1.03 + 1e-12, (name, truth, row.to_dict())
        else:  # what one node cannot see keeps the part of its sourced range the cells allow, the truth in it
            assert row["allowed_low"] <= truth <= row["allowed_high"] + 1e-9, (name, truth, row.to_dict())
    assert (cal.cells["error"].abs() < 0.03).all(), cal.cells.sort_values("error").to_string()
    # the interval of the cluster's prediction carries the fit's draws: the fitted parameters vary across them
    draws = cal.draws(8)
    assert len({round(d["shm_edge_gbyte_s"], 6) for d in draws}) > 1
    assert all(set(d) == set(t.index) for d in draws)


@pytest.mark.parametrize(
    "drop, needle",
    [
        (("scheme", "bytescheduler-a2a"), "no 4-GPU rows of bytescheduler-a2a"),
        (("scheme", "wfbp-ps"), "no 4-GPU rows of wfbp-ps"),
        (("workload", "bert-large"), "no rows of bert-large"),
        (("scheme", "single-gpu"), "has no 1-GPU row"),
    ],
)
def test_a_table_missing_a_method_or_a_workload_is_refused_in_one_line(tmp_path, drop, needle):
    table = _study_table()
    column, value = drop
    f = tmp_path / "one-node.csv"
    table[table[column] != value].to_csv(f, index=False)
    with pytest.raises(UserError, match=needle):
        sc.calibrate(f, PROFILES, lowo=False)
    r = CliRunner().invoke(
        cli,
        [
            "predict",
            "--workload",
            "bert-base",
            "--device-preset",
            "study-gpu",
            "--cluster",
            "study-ib-100g",
            "--nodes",
            "2",
            "--calibrate",
            str(f),
        ],
    )
    assert r.exit_code == 2, r.output
    assert needle in r.output and len(r.output.strip().splitlines()) == 1, r.output


@pytest.mark.parametrize(
    "args, needle",
    [
        # on a link preset --calibrate fits ddlbench's own stacks, from a run directory: the study's table is not one
        (["--link", "ib-100g"], "calibrates the study's cluster: --cluster study-*"),
        (["--cluster", "study-ib-100g", "--calibrate-missing"], None),
    ],
)
def test_calibrate_needs_the_study_cluster_and_a_readable_table(tmp_path, args, needle):
    if needle is None:  # a path that is neither a run directory nor a table
        args, needle = ["--cluster", "study-ib-100g"], "not a run directory, nor a .csv or .parquet table"
        target = str(tmp_path / "nothing.txt")
    else:
        target = str(sc.STUDY_TABLE)
    r = CliRunner().invoke(
        cli, ["predict", "--workload", "bert-base", "--device-preset", "study-gpu", *args, "--calibrate", target]
    )
    assert r.exit_code == 2, r.output
    assert needle in r.output and len(r.output.strip().splitlines()) == 1, r.output


def test_a_table_the_model_cannot_reproduce_does_not_converge_and_predicts_nothing(tmp_path, monkeypatch):
    # the fitter itself: a line through cells that lie on a parabola leaves the far cells off, so it says so
    p = Param("a", 0.0, 10.0)
    cells = Cells({k: 1.0 + k * k for k in range(6)}, {})
    fit = fit_params(
        [Block("line", (p,), tuple(range(6)))], lambda v, keys: {k: 1.0 + v["a"] * k for k in keys}, cells, {"a": 1.0}
    )
    assert not fit.converged and "does not reproduce these cells" in fit.message
    # and `ddlbench predict --calibrate` stops there with that message instead of predicting
    monkeypatch.setattr(
        "harness.study.calibration.calibrate", lambda *a, **k: sc.Calibration(fit, 0.0, {}, pd.DataFrame(), None, "t")
    )
    r = CliRunner().invoke(
        cli,
        [
            "predict",
            "--workload",
            "bert-base",
            "--device-preset",
            "study-gpu",
            "--cluster",
            "study-ib-100g",
            "--nodes",
            "2",
            "--calibrate",
            str(sc.STUDY_TABLE),
        ],
    )
    assert r.exit_code == 2 and "did not converge" in r.output and "does not reproduce" in r.output, r.output
    assert "throughput" not in r.output


def test_the_fitter_recovers_a_smooth_model_and_says_what_the_cells_do_not_determine():
    a, b = Param("a", 0.1, 10.0, (1.0, 0.5, 2.0)), Param("b", 0.0, 5.0, (1.0, 0.0, 5.0))
    truth = {"a": 3.0, "b": 2.0}
    model = lambda v, keys: {k: v["a"] * (1 + k) for k in keys}
    cells = Cells({k: truth["a"] * (1 + k) for k in range(5)}, {k: 0.02 * truth["a"] * (1 + k) for k in range(5)})
    fit = fit_params([Block("ab", (a, b), tuple(range(5)))], model, cells, {"a": 1.0, "b": 1.0})
    assert fit.converged and math.isclose(fit.values["a"], 3.0, rel_tol=1e-3)
    det = fit.determined()
    assert det == {"a": True, "b": False}
    rows = {r["parameter"]: r for r in fit.table()}
    assert rows["a"]["low"] <= 3.0 <= rows["a"]["high"] and rows["a"]["high"] / rows["a"]["low"] < 1.1
    xs = np.array([d["b"] for d in fit.draws(200)])  # b keeps its sourced range
    assert 0.0 <= xs.min() < 1.0 and 4.0 < xs.max() <= 5.0


def test_predict_calibrate_predicts_the_cluster_from_the_fitted_values(tmp_path):
    """`ddlbench predict --calibrate` with the study's one-node table: the fitted parameters said, and the
    prediction at 4 GPUs (the fitted cells) close to the table, at 8 GPUs present with ordered intervals."""
    profiles = [x for w in sc.WORKLOADS for x in ("--profile", str(PROFILES / f"profile-{w}.parquet"))]
    r = CliRunner().invoke(
        cli,
        [
            "predict",
            *profiles,
            "--device-preset",
            "study-gpu",
            "--cluster",
            "study-ib-100g",
            "--nodes",
            "1,2",
            "--schemes",
            "bsp-a2a,wfbp-ps",
            "--intervals",
            "4",
            "--calibrate",
            str(sc.STUDY_TABLE),
            "-o",
            str(tmp_path / "p.parquet"),
        ],
    )
    assert r.exit_code == 0, r.output
    assert "fitted shm_edge_gbyte_s = " in r.output and "fitted bs_fwd_gap_s = " in r.output
    df = pd.read_parquet(tmp_path / "p.parquet")
    df = df[df["workload"] == "bert-base"]
    assert (df["pred_low"] <= df["throughput_median"]).all() and (df["throughput_median"] <= df["pred_high"]).all()
    rows = {(int(x.workers), x.scheme): x.throughput_median for x in df.itertuples()}
    table = _study_table()
    for m in ("bsp-a2a", "wfbp-ps"):
        measured = table[(table["workload"] == "bert-base") & (table["scheme"] == m)]["throughput"].mean()
        assert abs(rows[(4, m)] / measured - 1) < 0.05, (m, rows[(4, m)], measured)
        assert (8, m) in rows
