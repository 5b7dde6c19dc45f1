"""The simulator gives the numbers it gave when tests/data/sim_golden.json was written (scripts/sim_golden.py:
the study's cells at three input sets, ddlbench's own stacks on plain, shaped and host-path links), within 1e-9
relative: a change that makes the simulator faster must not make it different.

    pytest -q tests/unit/predict/test_sim_golden.py      # about 30 s on a shared two-core machine
"""

from __future__ import annotations

import importlib.util
import json

import pytest

from helpers import ROOT

_spec = importlib.util.spec_from_file_location("sim_golden", ROOT / "scripts" / "sim_golden.py")
sim_golden = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(sim_golden)

GOLDEN = json.loads(sim_golden.GOLDEN.read_text())


@pytest.mark.parametrize("part", [*sim_golden.value_sets(), "own"])
def test_the_simulator_gives_the_golden_numbers(part):
    got = sim_golden.outcomes(part)
    want = {k: v for k, v in GOLDEN.items() if k.split("|")[0] in (part, f"{part}-dedicated", f"{part}-colocated")}
    assert len(got) == len(want) > 0
    diff = sim_golden.differences(got, want)
    assert not diff, (
        f"{len(diff)} numbers moved (relative {sim_golden.REL}), first: {diff[:10]}; if the model changed on "
        "purpose, rewrite the file with `python scripts/sim_golden.py --regenerate` and say why in the commit"
    )
