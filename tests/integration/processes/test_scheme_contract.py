"""The scheme contract (docs/ARCHITECTURE.md, "Scheme"): hooks declared on the base class, knobs
as validated frozen dataclasses, a simulation model registered beside every scheme, and a new scheme
added as one file plus its test (tests/toy_scheme.py).

    pytest -q tests/integration/processes/test_scheme_contract.py
"""

from __future__ import annotations

import dataclasses
import importlib
import os
import sys

import pytest

from harness.contracts.cell import CellSpec
from harness.core.errors import UserError
from harness.predict.predictor import Network, predict_rows, resolve_methods, simulate
from harness.schemes import SCHEMES, Scheme
from harness.sim.links import get_link
from harness.sim.model import Model, NoModel
from helpers import BERTISH, ROOT, TESTS, cluster

NO_MODEL_ALLOWED = {"zero0", "zero1", "zero2", "zero3", "byteps"}
"""Framework natives whose own schedules are not simulated: they must say why (NoModel(reason))."""
HOOKS = (
    "setup",
    "before_backward",
    "backward",
    "after_backward",
    "wait",
    "step",
    "quiesce",
    "flush",
    "shutdown",
    "probe_comm",
    "final_parameters",
    "describe",
    "comm_bytes_per_iter",
)


def test_every_scheme_has_a_model_or_says_why_not():
    for name, entry in SCHEMES.items():
        if isinstance(entry.model, Model):
            assert callable(entry.model.simulate), name
            continue
        assert name in NO_MODEL_ALLOWED, f"scheme {name!r} registers no simulation model (register(..., model=))"
        assert isinstance(entry.model, NoModel) and len(entry.model.reason) > 20, name


def test_the_loop_and_worker_call_only_declared_hooks():
    for hook in HOOKS:
        assert callable(getattr(Scheme, hook)), hook
    assert Scheme.profile_iters == 0
    for path in ("harness/rank/worker.py", "harness/measure/loop.py"):
        text = (ROOT / path).read_text()
        assert "getattr(" not in text and "hasattr(" not in text, f"{path} probes for a hook"


def test_knobs_are_typed_validated_once_and_frozen():
    ddp = SCHEMES.get("ddp")
    k = ddp.make_knobs({"bucket_cap_mb": "50"})
    assert k.bucket_cap_mb == 50.0 and k.broadcast_buffers == 1
    with pytest.raises(dataclasses.FrozenInstanceError):
        k.bucket_cap_mb = 1.0
    for bad, words in (
        ({"bucket_cap_mb": -1}, "must be > 0"),
        ({"bucket_cap_mb": "big"}, "is not a float"),
        ({"bucket_cap_mb": None}, "needs a value"),
        ({"broadcast_buffers": 2}, "must be <= 1"),
        ({"bucket_cap_mb": float("inf")}, "finite"),
        ({"bucket_cap_mb": float("nan")}, "finite"),
        ({"bucket_mb": 1}, "unknown knob"),
    ):
        with pytest.raises(UserError, match=words) as e:
            ddp.resolve_knobs(bad)
        assert "fix" in str(e.value) or "its knobs are" in str(e.value)
    assert SCHEMES.get("mgwfbp").resolve_knobs({}) == {"alpha_s": None, "beta_s_per_mb": None, "commbench_run": None}


def test_resolved_knobs_stay_the_recorded_plain_dict():
    assert SCHEMES.get("ddp").resolve_knobs({}) == {"bucket_cap_mb": 25.0, "broadcast_buffers": 1}
    assert list(SCHEMES.get("bytescheduler-a2a").resolve_knobs({})) == ["partition_mb", "credit_mb"]
    assert SCHEMES.get("horovod").resolve_knobs({"fusion_threshold_mb": 64.0}) == {
        "fusion_threshold_mb": 64,
        "cycle_time_ms": 1.0,
    }
    for name, entry in SCHEMES.items():  # `ddlbench list` prints a line of help for every knob
        for knob_name, knob in entry.knobs.items():
            assert knob.doc, f"{name}.{knob_name} has no docstring under its field"


@pytest.fixture
def toy(monkeypatch):
    """tests/toy_scheme.py registered here and in every rank (DDLBENCH_SCHEME_MODULES)."""
    here = str(TESTS)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [here, os.environ.get("PYTHONPATH")])))
    monkeypatch.setenv("DDLBENCH_SCHEME_MODULES", "toy_scheme")
    monkeypatch.syspath_prepend(here)
    sys.modules.pop("toy_scheme", None)
    importlib.import_module("toy_scheme")
    yield SCHEMES.get("toy")
    SCHEMES._entries.pop("toy", None)  # leave the registry as the other tests know it
    sys.modules.pop("toy_scheme", None)


@pytest.mark.slow
def test_a_toy_scheme_is_one_file_and_trains_losslessly_and_predicts(toy, tmp_path, monkeypatch):
    from helpers import (  # the same check as every scheme
        SMALL,
        STEPS,
        check,
        reference,
        run_and_load,
    )

    wl = "bert-base-tiny"
    params = run_and_load(
        tmp_path, monkeypatch, CellSpec(workload=wl, scheme="toy", workers=2, knobs={"reverse": 1}, **SMALL[wl])
    )
    check(params, reference(wl, 2, SMALL[wl]["batch"], SMALL[wl]["seq_len"], STEPS), wl)
    assert "toy" in resolve_methods("all")
    out = simulate("toy", BERTISH, cluster(2, 4))
    assert out.iter_s > BERTISH.iteration_s and out.plan == {"tensors": len(BERTISH.grad_bytes)}
    df = predict_rows([BERTISH], [Network("ib-100g", get_link("ib-100g"), get_link("pcie3-x16"))], [2], 4, ["toy"])
    assert df["knob_reverse"].tolist() == [0] and df["backend"].tolist() == ["torch"]
