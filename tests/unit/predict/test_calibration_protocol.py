"""The one calibration shape (harness/predict/calibration.py): a new kind of calibration is one module that meets the
protocol, reached through the one door (`ClusterEntry.calibrate`); the study's and ddlbench's own calibrations meet
it; parameters are data, leave-one-workload-out and the discrepancy rule are one each."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pytest

from harness.core.errors import UserError
from harness.predict.calibration import (
    MISS_CLIP,
    Calibration,
    FittedCells,
    OfItsCluster,
    leave_one_workload_out,
    misses,
    read_bounded,
    require_converged,
)
from harness.predict.clusters import CLUSTERS, ClusterEntry
from harness.predict.fitting import Block, Cells, Fit, fit_params
from harness.predict.own_calibration import SOURCES, OwnCalibration, Runs
from harness.predict.predictor import Network, predict_rows
from harness.predict.request import load_models, run_predict
from harness.sim.bytescheduler_engine import ENGINE_HANDOFF_S
from harness.sim.links import Link
from harness.sim.ps import SERVER_GBYTE_S
from harness.study.calibration import Calibration as OneNodeCalibration
from harness.study.two_node import TwoNodeCalibration

# --- a new kind of calibration: one module's worth, meeting the protocol ----------------------------------------

TOY_PARAMS = """
[toy.rate_gbit_s]
value = 10.0
low = 1.0
high = 25.0
search = [0.5, 50.0]
unit = "Gbit/s"
kind = "estimate"
what = "the toy lab's network rate"
source = "a toy: this test's own"
"""
TRUE_RATE = 3.0
METHODS = ["bsp-a2a", "ddp"]
WORKLOAD = "bert-base-tiny"


def toy_network(rate_gbit_s: float) -> Network:
    intra = Link("toy-intra", 96.0, 2e-6, "the toy's own")
    return Network("toy-lab", Link("toy-inter", rate_gbit_s, 20e-6, "the toy's own"), intra)


def toy_rows(models, node_counts, methods, knobs, rate_gbit_s):
    return predict_rows(models, [toy_network(rate_gbit_s)], list(node_counts), 2, methods, knobs=knobs)


@dataclass
class ToyCalibration(OfItsCluster, FittedCells):
    """The toy lab's network rate fitted to measured cells: its fit and cells, the rest of the protocol from the
    shared defaults (values, draws, table, the one discrepancy rule; every method of its cluster, no networks)."""

    fit: Fit
    cells: pd.DataFrame
    lowo: pd.DataFrame | None = None


@pytest.fixture(scope="module")
def models():
    return load_models((), (WORKLOAD,), "study-gpu", 200.0, None, "auto")


@pytest.fixture
def toy_lab(tmp_path, models, monkeypatch):
    """The toy lab registered as a cluster whose door fits its rate from a measured table (CSV: workload, scheme,
    throughput); returns the table's path and the calls its door saw."""
    params = tmp_path / "toy.toml"
    params.write_text(TOY_PARAMS)
    rate = read_bounded(params)["toy"]["rate_gbit_s"]
    measured = toy_rows(models, [2], METHODS, None, TRUE_RATE)
    table = tmp_path / "toy-measured.csv"
    measured[["workload", "scheme", "throughput_median"]].rename(columns={"throughput_median": "throughput"}).to_csv(
        table, index=False
    )
    seen = []

    def calibrate(sources: tuple, profiles: dict) -> ToyCalibration:
        seen.append(sources)
        df = pd.read_csv(sources[0])
        keys = list(zip(df["workload"], df["scheme"]))
        cells = Cells(dict(zip(keys, df["throughput"])), {k: 0.0 for k in keys})

        def predict(v, asked):
            got = toy_rows(models, [2], METHODS, None, v["rate_gbit_s"])
            x = dict(zip(zip(got["workload"], got["scheme"]), got["throughput_median"]))
            return {k: x[k] for k in asked}

        block = Block("toy network", (rate.param(),), tuple(keys))
        fit = fit_params([block], predict, cells, {"rate_gbit_s": rate.input.value}, starts=1)
        rows = df.rename(columns={"throughput": "measured"}).assign(predicted=[fit.predicted[k] for k in keys])
        return ToyCalibration(fit, rows.assign(error=rows["predicted"] / rows["measured"] - 1))

    def curve(models, node_counts, methods, knobs, calibration=None):
        rate_gbit_s = calibration.values["rate_gbit_s"] if calibration is not None else rate.input.value
        return toy_rows(models, node_counts, methods, knobs, rate_gbit_s)

    entry = ClusterEntry("a toy lab", 2, lambda n: None, curve, calibrate=calibrate)
    monkeypatch.setitem(CLUSTERS._entries, "toy-lab", entry)
    return table, seen


def test_a_new_kind_of_calibration_is_one_module_through_the_one_door(toy_lab):
    table, seen = toy_lab
    ask = dict(
        clusters=("toy-lab",),
        workloads=(WORKLOAD,),
        device_preset="study-gpu",
        throughput_samples_per_s=200.0,
        nodes="2",
    )
    stated = run_predict(schemes=",".join(METHODS), **ask)
    df = run_predict(schemes=",".join(METHODS), calibrate=(str(table),), **ask)
    assert seen == [(str(table),)]  # the door was asked once, with the sources as given
    fitted = {r["parameter"]: r for r in df.attrs["calibration"]}
    assert fitted["rate_gbit_s"]["value"] == pytest.approx(TRUE_RATE, rel=0.05)
    assert fitted["rate_gbit_s"]["sourced_value"] == 10.0  # the data file's, beside the fit
    measured = pd.read_csv(table).set_index("scheme")["throughput"]
    for r in df.itertuples():
        assert r.throughput_median == pytest.approx(measured[r.scheme], rel=0.01)
    assert (stated.set_index("scheme")["throughput_median"] > df.set_index("scheme")["throughput_median"]).all()
    assert "uncalibrated" not in df.attrs  # it covers every method of its cluster (OfItsCluster)


def test_the_toy_and_every_calibration_of_the_house_meet_the_protocol(toy_lab, tmp_path):
    table, _ = toy_lab
    toy = CLUSTERS.get("toy-lab").calibrate((str(table),), {})
    assert isinstance(toy, Calibration)
    assert set(toy.discrepancy()) == set(METHODS)
    cells = pd.DataFrame({"scheme": ["ddp"], "measured": [1.0], "predicted": [1.0]})
    for kind in (OneNodeCalibration, TwoNodeCalibration):  # members present on the class or its fields
        for member in ("values", "draws", "table", "discrepancy", "methods", "networks", "compute", "check_request"):
            assert hasattr(kind, member), f"{kind.__name__} lacks {member}"
    one = OneNodeCalibration(toy.fit, 0.0, {}, cells, None, "t")
    assert isinstance(one, Calibration) and one.compute("m") == "m" and one.networks == []
    own = OwnCalibration(toy.fit, Runs(cells, {}, {}, []), cells, None, cells)
    assert isinstance(own, Calibration) and own.methods is not None and own.networks == []


def test_a_fit_that_did_not_converge_is_refused_in_one_line(toy_lab):
    table, _ = toy_lab
    toy = CLUSTERS.get("toy-lab").calibrate((str(table),), {})
    toy.fit.converged, toy.fit.message = False, "the toy's search ran out"
    with pytest.raises(UserError) as e:
        require_converged(toy, "t.csv", "nothing is predicted from it")
    assert str(e.value) == (
        "--calibrate t.csv: the fit did not converge (the toy's search ran out); nothing is predicted from it"
    )
    assert "\n" not in str(e.value)


# --- one discrepancy rule, one leave-one-workload-out, parameters as data ---------------------------------------


def test_misses_clip_a_far_fold_to_three_robust_sigmas():
    rng = np.random.default_rng(0)
    r = [*rng.normal(0.0, 0.02, 30), 2.0]  # one held-out fit stuck in a far basin
    cells = pd.DataFrame({"scheme": "wfbp-a2a", "measured": 1.0, "predicted": np.exp(r)})
    got = misses(cells)["wfbp-a2a"]
    assert got.max() < 0.2  # the far fold clipped, not 2.0
    mid = np.median(r)
    assert (np.abs(got - mid) <= MISS_CLIP * 0.02 * 1.6).all()
    assert np.allclose(np.sort(got)[:-1], np.sort(r)[:-1], atol=1e-12)  # the typical misses untouched


def _fold(held: str) -> pd.DataFrame:
    return pd.DataFrame({"held_out": [held], "scheme": ["ddp"], "measured": [2.0], "predicted": [float(len(held))]})


@pytest.mark.parametrize("processes", [1, 2])
def test_leave_one_workload_out_runs_every_fold_and_the_whole_fit(processes):
    fit, held = leave_one_workload_out(["a", "bb", "ccc"], _fold, lambda: "whole", processes=processes)
    assert fit == "whole"
    assert list(held["held_out"]) == ["a", "bb", "ccc"]
    assert list(held["error"]) == [-0.5, 0.0, 0.5]
    assert leave_one_workload_out(["a"], _fold, lambda: "whole") == ("whole", None)


def test_a_closure_fold_runs_in_the_forked_workers():
    offset = 10.0

    def fold(held: str) -> pd.DataFrame:  # not picklable: the workers inherit it
        return pd.DataFrame({"scheme": ["ddp"], "measured": [offset], "predicted": [offset + len(held)]})

    _, held = leave_one_workload_out(["x", "yy"], fold, lambda: None, processes=2)
    assert list(held["predicted"]) == [11.0, 12.0]


@pytest.mark.parametrize(
    "body, needle",
    [
        (TOY_PARAMS.replace('unit = "Gbit/s"\n', ""), "missing ['unit']"),
        (TOY_PARAMS.replace("search = [0.5, 50.0]", "search = [2.0, 50.0]"), "narrower than its sourced range"),
        (TOY_PARAMS.replace("value = 10.0", "value = 30.0"), "outside its range"),
        (TOY_PARAMS + 'extra = "x"\n', "unknown ['extra']"),
    ],
)
def test_a_malformed_parameter_file_is_refused_naming_the_key(tmp_path, body, needle):
    f = tmp_path / "bad.toml"
    f.write_text(body)
    with pytest.raises(ValueError, match=needle.replace("[", r"\[").replace("]", r"\]")):
        read_bounded(f)


def test_the_own_stacks_data_file_states_the_simulators_constants():
    assert SOURCES["stack"]["engine_handoff_s"].input.value == ENGINE_HANDOFF_S
    assert SOURCES["servers"]["server_gbyte_s"].input.value == SERVER_GBYTE_S
    for group in SOURCES.values():
        for b in group.values():
            assert b.search[0] <= b.input.low <= b.input.value <= b.input.high <= b.search[1]
            assert b.input.source.strip() and math.isfinite(b.input.value)
