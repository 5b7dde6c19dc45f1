"""The fault matrix (scripts/fault_matrix.py; README, "Faults tried"): every row names tests, every test it names
exists, and a row naming one that does not is caught.

    pytest -q tests/unit/house/test_fault_matrix.py      # under a second
"""

from __future__ import annotations

import importlib.util

from helpers import ROOT

_spec = importlib.util.spec_from_file_location("fault_matrix", ROOT / "scripts" / "fault_matrix.py")
fault_matrix = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fault_matrix)


def test_every_fault_in_the_readme_names_tests_that_exist():
    matrix = fault_matrix.rows()
    assert len(matrix) >= 19, matrix
    assert all(ids for _, ids in matrix), [fault for fault, ids in matrix if not ids]
    assert fault_matrix.missing(matrix) == []
    same = dict(matrix)
    assert same["a rank hangs"] == same["a rank crashes (exit 17)"]  # "the same": the row above's tests


def test_a_test_that_does_not_exist_is_named(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text(
        "## Faults tried\n\n| fault | what holds | rows lost | processes left | test |\n|---|---|---|---|---|\n"
        "| a crash | fails | none | none | `test_faults.py::test_crash_and_hang_fail_their_cells_and_keep_the_rest`, "
        "`test_no_such_test` |\n\n## Next\n"
    )
    matrix = fault_matrix.rows(readme)
    assert fault_matrix.missing(matrix) == ["tests/integration/processes/test_faults.py::test_no_such_test"]
