"""The study cluster's inputs as data (harness/study/inputs/*.toml, read by harness/study/inputs.py) and typed
(`StudyValues`): the order the samples draw in, the files and the dataclasses agreeing, shared sources written
once, and no unnamed number in the cost formulas of harness/study/cluster.py.

    pytest -q tests/unit/study/test_inputs.py
"""

from __future__ import annotations

import ast
import json
import shutil
from dataclasses import fields
from pathlib import Path
from typing import get_type_hints

import pytest
import tomllib

from harness.study import calibration, cluster
from harness.study.inputs import FOLDER, GROUPS, INPUTS, SOURCES, StudyValues, load

ORDER = [
    "shm_edge_gbyte_s",
    "nccl_hop_s",
    "nccl_launch_s",
    "nccl_tree_level_s",
    "host_path_gbyte_s",
    "ib_gbyte_s",
    "ib_latency_s",
    "ipoib_gbit_s",
    "eth_gbit_s",
    "eth_latency_s",
    "tcp_message_s",
    "mpi_shm_level_s",
    "mpi_verbs_level_s",
    "mpi_tcp_level_s",
    "mpi_verbs_message_s",
    "mpi_tcp_message_s",
    "hvd_coordinator_s",
    "hvd_launch_s",
    "hvd_cycle_s",
    "hvd_fusion_mb",
    "py_hook_s",
    "d2d_gbyte_s",
    "copy_launch_s",
    "bs_partition_elems",
    "bs_credit_elems",
    "bs_partition_cpu_s",
    "bs_param_step_s",
    "bs_fwd_gap_s",
    "py_switch_interval_s",
    "gil_forced_extra_s",
    "gil_handoff_s",
    "bs_task_py_s",
    "bs_done_py_s",
    "bs_scan_step_s",
    "fwd_gil_per_layer",
    "gil_acquires_per_hook",
    "gil_convoy_share",
    "py_op_s",
    "calib_adam_share",
    "per_method_optimizer",
    "overlap_compute_slowdown",
    "overlap_comm_slowdown",
    "byteps_partition_bytes",
    "byteps_nccl_edge_gbyte_s",
    "byteps_signal_s",
    "pinned_copy_gbyte_s",
    "server_sum_gbyte_s",
    "server_recv_s",
    "rdma_message_s",
    "ipoib_stream_gbit_s",
    "ipoib_nic_gbit_s",
    "zmq_van_gbyte_s",
    "eth_van_gbyte_s",
    "compute_scale",
]
"""The inputs in the order harness/study/inputs.py listed them before they became data (issue 49): the
Latin-hypercube samples draw one stream of random numbers in this order, so another order changes every
interval of the report."""
REPORTS = Path(__file__).resolve().parents[3] / "reports" / "study-prediction"


def test_the_inputs_load_in_the_order_the_samples_draw_in():
    assert [i.name for i in INPUTS] == ORDER


def test_each_data_file_lists_exactly_its_dataclass_fields_in_order():
    for group, typ in GROUPS.items():
        in_file = list(tomllib.loads((FOLDER / f"{group}.toml").read_text()))
        assert in_file == [f.name for f in fields(typ)], group
        assert set(get_type_hints(typ).values()) == {float}, group
    assert [f.name for typ in GROUPS.values() for f in fields(typ)] == ORDER
    nominal = INPUTS.nominal()
    v = StudyValues.from_flat(nominal)
    assert v.flat() == nominal and list(v.flat()) == ORDER
    assert v.nccl.shm_edge_gbyte_s == INPUTS["shm_edge_gbyte_s"].value and StudyValues.of(v) is v


def test_values_by_name_missing_one_or_naming_an_unknown_one_are_refused():
    nominal = INPUTS.nominal()
    with pytest.raises(ValueError, match="missing compute_scale"):
        StudyValues.from_flat({k: x for k, x in nominal.items() if k != "compute_scale"})
    with pytest.raises(ValueError, match="unknown shm_edge_gbit_s"):
        StudyValues.from_flat({**nominal, "shm_edge_gbit_s": 40.0})


@pytest.mark.parametrize(
    "edit, needle",
    [
        (
            lambda d: (d / "nccl.toml").write_text(
                (d / "nccl.toml").read_text() + "\n[nccl_extra_s]\nvalue = 1.0\n"
                'low = 1.0\nhigh = 1.0\nunit = "s"\nkind = "code"\nwhat = "w"\n'
                'source = "s"\n'
            ),
            "NcclValues has the fields",
        ),
        (
            lambda d: (d / "gpu.toml").write_text((d / "gpu.toml").read_text().replace("value = 0.05", "vaule = 0.05")),
            "unknown \\['vaule'\\]",
        ),
        (
            lambda d: (d / "gpu.toml").write_text((d / "gpu.toml").read_text().replace("${overlap}", "${overlapp}")),
            "names \\$\\{overlapp\\}, not a key of sources.toml",
        ),
        (
            lambda d: (d / "gpu.toml").write_text((d / "gpu.toml").read_text().replace("${overlap}", "$5 ${overlap}")),
            "write a literal \\$ as \\$\\$",
        ),
        (lambda d: (d / "extra.toml").write_text(""), "extra.toml is read by no one"),
    ],
)
def test_a_data_file_out_of_step_with_the_code_is_refused(tmp_path, edit, needle):
    folder = tmp_path / "inputs"
    shutil.copytree(FOLDER, folder)
    assert [i.name for i in load(folder)] == ORDER
    edit(folder)
    with pytest.raises(ValueError, match=needle):
        load(folder)


def test_a_source_several_inputs_cite_is_written_once():
    shared = tomllib.loads((FOLDER / f"{SOURCES}.toml").read_text())["sources"]
    raw = {p.name: p.read_text() for p in FOLDER.glob("*.toml") if p.stem != SOURCES}
    for key, text in shared.items():
        citing = [i.name for i in INPUTS if text in i.source]
        assert len(citing) >= 2, (key, citing)
        assert sum(r.count(f"${{{key}}}") for r in raw.values()) == len(citing), key


def test_the_plugins_python_costs_in_the_sources_are_the_microbenchmarks():
    """Numbers a source states were computed from the GIL microbenchmark before they became text: they stay
    its figures (regenerate with scripts/reference/gil_handoff.py and edit the text together)."""
    costs = json.loads((REPORTS / "gil-handoff.json").read_text())["python_costs"]
    assert f"takes {costs['task_per_partition_s'] * 1e6:.1f} us on CPython 3.11" in INPUTS["bs_task_py_s"].source
    assert f"take {costs['done_per_handle_s'] * 1e6:.1f} us on" in INPUTS["bs_done_py_s"].source
    assert f"{costs['torch_op_s'] * 1e6:.2f} us per CPU op" in INPUTS["py_op_s"].source


def test_the_calibrations_search_bounds_hold_each_parameters_sourced_range():
    for block in calibration.PARAMS.values():
        for p in block:
            i = INPUTS[p.name]
            assert (p.low, p.high) == calibration.SEARCH_BOUNDS[p.name]
            assert p.low <= i.low <= i.value <= i.high <= p.high, p.name


# --- no unnamed number in the cost formulas ----------------------------------------------------------------

UNIT_FACTORS = {0, 1, 2, 8, 1e3, 1e6, 1e9, 1e-3, 1e-6, 1e-9}
"""Numbers a formula may hold bare: 0, 1 and 2 (nothing, one, a ring's 2(N - 1) and other pairs) and unit
conversions (8 bits a byte; kilo, mega, giga; milli, micro, nano). Every other number is an input or a named
module constant with its source."""


def unnamed_numbers(source: str) -> list[str]:
    """`line: number` of each numeric literal outside a module-level constant (an UPPER_CASE assignment) that is
    not in UNIT_FACTORS."""
    out = []
    for stmt in ast.parse(source).body:
        targets = (
            stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target] if isinstance(stmt, ast.AnnAssign) else []
        )
        if targets and all(isinstance(t, ast.Name) and t.id.isupper() for t in targets):
            continue
        for node in ast.walk(stmt):
            if (
                isinstance(node, ast.Constant)
                and isinstance(node.value, (int, float))
                and not isinstance(node.value, bool)
                and node.value not in UNIT_FACTORS
            ):
                out.append(f"{node.lineno}: {node.value!r}")
    return out


def test_the_study_clusters_cost_formulas_hold_no_unnamed_number():
    assert unnamed_numbers(Path(cluster.__file__).read_text()) == []


def test_the_unnamed_number_check_finds_a_planted_factor():
    planted = "SCALE = 1.5\n\ndef f(v, n):\n    return SCALE * v + 2 * (n - 1) * 1e-6 + 0.7 * v / 8\n"
    assert unnamed_numbers(planted) == ["4: 0.7"]
