"""The simulator's golden grid: every outcome the simulation models give on a fixed grid of cells, kept in
tests/data/sim_golden.json so that a change meant to make the simulator faster, not different, can be checked
to give the same numbers (tests/unit/predict/test_sim_golden.py, relative 1e-9).

    python scripts/sim_golden.py --regenerate   # rewrite the file: only when the model changes on purpose
    python scripts/sim_golden.py                # compare the current simulator with the file

The grid: the study's workloads x networks x seven methods at 1, 2, 4 and 8 nodes (harness/study/curve.py), at
the nominal inputs, at the transports the two-node test fits back (tests/unit/study/test_two_node.py) and at one
Latin-hypercube sample of the inputs; and ddlbench's own stacks on link presets (a plain, a shaped and a host-path
network, dedicated and co-located servers) for every modelled method.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import replace
from pathlib import Path

from harness import backends
from harness.predict import predictor
from harness.predict.predictor import SEVEN_METHODS, Network, modelled, predict_rows
from harness.sim.links import Link, get_link
from harness.study import calibration as sc
from harness.study.curve import predict_curve
from harness.study.inputs import INPUTS

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = ROOT / "tests" / "data" / "sim_golden.json"
PROFILES = ROOT / "reports" / "study-prediction" / "profiles"
REL = 1e-9
"""How close a number must stay: the simulator's speed-ups keep its arithmetic, so only float noise may move."""
TRUTH = {  # a frozen copy of the two-node test's first truth (each binds somewhere): the grid must not move with it
    "ib_gbyte_s": 9.0,
    "host_path_gbyte_s": 20.0,
    "rdma_message_s": 5e-6,
    "server_sum_gbyte_s": 4.0,
    "byteps_signal_s": 30e-6,
    "server_recv_s": 100e-6,
    "eth_gbit_s": 8.5,
    "tcp_message_s": 30e-6,
    "eth_van_gbyte_s": 1.5,
    "ipoib_gbit_s": 20.0,
    "ipoib_stream_gbit_s": 12.0,
    "zmq_van_gbyte_s": 2.5,
}
STUDY_NODES = (1, 2, 4, 8)
OWN_NODES = (1, 2, 4)
FIELDS = ("iter_s_median", "throughput_median", "forward_s", "backward_s", "comm_wait_s", "optimizer_s", "comm_only_s")


def value_sets() -> dict[str, dict]:
    nominal = INPUTS.nominal()
    return {"nominal": nominal, "truth": {**nominal, **TRUTH}, "lhs7": INPUTS.samples(4, seed=7)[2]}


def own_networks() -> list[Network]:
    pcie = get_link("pcie3-x16")
    shaped = Link("shaped-1g", 1.0, 1e-4, "a token-bucket link (golden grid)", burst_bytes=2e6, peak_gbit_s=10.0)
    host = Link("host", 96.0, 2e-6, "one PCIe 3.0 x16 path to host memory (golden grid)")
    return [
        Network("ib-100g", get_link("ib-100g"), pcie),
        Network("eth-10g", replace(get_link("eth-10g"), per_message_s=20e-6), pcie, host=host),
        Network("shaped-1g", shaped, pcie),
    ]


def _frames(selection: str | None = None):
    """(group label, predicted rows) of every part of the grid; `selection` keeps the study's cells of one value
    set and the own stacks (`own`) apart, so a test can run a part."""
    models = sc.calibration_models(sc.read_one_node(sc.STUDY_TABLE), list(sc.WORKLOADS), PROFILES)
    for label, values in value_sets().items():
        if selection in (None, label):
            yield label, predict_curve(models, None, values, node_counts=STUDY_NODES, methods=list(SEVEN_METHODS))
    if selection in (None, "own"):
        methods = [m for m in modelled() if m != "local"]
        for hosts in ("dedicated", "colocated"):
            rows = predict_rows(models[:2], own_networks(), list(OWN_NODES), 4, methods, server_hosts=hosts)
            yield f"own-{hosts}", rows


def outcomes(selection: str | None = None) -> dict[str, dict]:
    """cell -> [its numbers (FIELDS, in order), its plan facts], every simulation run afresh (the predictor's
    memo emptied)."""
    backends.load()
    predictor._MEMO.clear()
    out = {}
    for label, df in _frames(selection):
        for r in df.to_dict("records"):
            out[f"{label}|{r['cell_id']}"] = [[r[f] for f in FIELDS], json.loads(r["plan_json"])]
    return out


def differences(got: dict, want: dict, rel: float = REL) -> list[str]:
    """Each place where `got` is not `want` (numbers within `rel`), as `cell: path: got != want`."""
    out: list[str] = []
    for key in sorted(set(got) | set(want)):
        if key not in got or key not in want:
            out.append(f"{key}: {'missing' if key not in got else 'not in the golden file'}")
            continue
        _compare(got[key], want[key], key, rel, out)
    return out


def _compare(a, b, where: str, rel: float, out: list) -> None:
    if isinstance(a, dict) and isinstance(b, dict):
        if set(a) != set(b):
            out.append(f"{where}: keys {sorted(set(a) ^ set(b))} differ")
        for k in set(a) & set(b):
            _compare(a[k], b[k], f"{where}.{k}", rel, out)
    elif isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            out.append(f"{where}: {len(a)} items != {len(b)}")
        for i, (x, y) in enumerate(zip(a, b)):
            _compare(x, y, f"{where}[{i}]", rel, out)
    elif isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        if not (math.isclose(a, b, rel_tol=rel, abs_tol=1e-300) or (math.isnan(a) and math.isnan(b))):
            out.append(f"{where}: {a!r} != {b!r}")
    elif a != b:
        out.append(f"{where}: {a!r} != {b!r}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--regenerate", action="store_true", help="rewrite the golden file from the current simulator")
    args = p.parse_args(argv)
    got = outcomes()
    if args.regenerate:
        GOLDEN.write_text(json.dumps(got, sort_keys=True, separators=(",", ":")).replace("}],", "}],\n") + "\n")
        print(f"{len(got)} cells written to {GOLDEN.relative_to(ROOT)}")
        return 0
    diff = differences(got, json.loads(GOLDEN.read_text()))
    print("\n".join(diff[:50]) or f"{len(got)} cells: the same as {GOLDEN.relative_to(ROOT)}")
    return 1 if diff else 0


if __name__ == "__main__":
    sys.exit(main())
