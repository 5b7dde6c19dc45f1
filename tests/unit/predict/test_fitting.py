"""The fitter's global search and its intervals from refitting resampled cells (harness/predict/fitting.py): two
rates that trade off across two blocks (a NIC rate the ring's cells leave free above the host path that binds them,
and a server's rate that the PS cells see only through min(NIC, server)) are both shown as uncertain, each truth
that gives the same cells inside its interval; the same seed gives the same intervals.

    pytest -q tests/unit/predict/test_fitting.py
"""

from __future__ import annotations

import numpy as np
import pytest

from harness.predict.fitting import Block, Cells, Param, fit_params

NIC = Param("nic", 2.0, 12.5, (10.0, 8.0, 12.5))
HOST = Param("host", 8.0, 64.0, (20.0, 12.0, 48.0), search=False)
"""Known (one node measured it): the ring's cells then say only that the NIC is faster than host / 5."""
SERVER = Param("server", 1.0, 60.0, (20.0, 1.0, 60.0))
RING = tuple(("ring", k) for k in range(4))
PS = tuple(("ps", k) for k in range(4))


def two_nodes(v: dict, keys) -> dict:
    """The ring crosses the NIC and the host path (shared by a node's 4 GPUs and the NIC: host / 5), a push the NIC
    and the server's sum: each path at its slowest part. With the host path at 20, the ring's cells leave the NIC
    anywhere above 4 and a push at 6 is min(NIC, server): a NIC at 6 or a server at 6."""
    ring, ps = min(v["nic"], v["host"] / 5), min(v["nic"], v["server"])
    return {k: (ring if k[0] == "ring" else ps) * (1 + k[1]) for k in keys}


def fit_of(truth: dict, seed: int = 0):
    cells = two_nodes(truth, RING + PS)
    blocks = [Block("ring", (NIC, HOST), RING, scan=16), Block("ps", (SERVER,), PS, scan=8)]
    start = {"nic": 10.0, "host": 20.0, "server": 20.0}
    return fit_params(blocks, two_nodes, Cells(cells, {k: 0.01 * x for k, x in cells.items()}), start, seed=seed)


@pytest.mark.parametrize("truth", [{"nic": 9.0, "server": 6.0}, {"nic": 6.0, "server": 30.0}], ids=str)
def test_rates_that_trade_off_across_blocks_are_both_shown_uncertain(truth):
    # both truths give the same cells (the ring at host / 5 = 4, a push at 6): each must lie inside what is stated
    fit = fit_of({**truth, "host": 20.0})
    assert fit.converged, fit.message
    rows = {r["parameter"]: r for r in fit.table()}
    for name, other in (("nic", (9.0, 6.0)), ("server", (6.0, 30.0))):
        r = rows[name]
        lo, hi = (r["low"], r["high"]) if r["determined"] else (r["allowed_low"], r["allowed_high"])
        for x in other:
            assert lo * 0.97 <= x <= hi * 1.03, (name, x, r)


def test_the_same_seed_gives_the_same_intervals():
    a, b = fit_of({"nic": 9.0, "host": 20.0, "server": 6.0}), fit_of({"nic": 9.0, "host": 20.0, "server": 6.0})
    assert np.array_equal(a.refitted, b.refitted) and len(a.refitted) == 24
    assert a.draws(40, seed=3) == b.draws(40, seed=3)
