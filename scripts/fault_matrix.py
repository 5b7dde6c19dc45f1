"""The fault matrix (README, "Faults tried"): every fault the README's table names and the tests that try it, read
from the table itself, so that the table and the tests cannot drift apart unseen.

    python scripts/fault_matrix.py          # each fault and its tests; exit 1 naming a test that does not exist
    python scripts/fault_matrix.py --run    # run each fault's tests (pytest, one fault at a time: they start
                                            # processes), then one line per fault: held or not, and the figures

A test is named in the table's last column as `MODULE::test_name` (a module under tests/integration/processes/
unless a path is given), a bare `test_name` (the module named before it in the same cell), or "the same" (the
row above's tests). Tests marked `root` skip themselves on a machine that is not root: --run says so.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DEFAULT_FOLDER = "tests/integration/processes"
"""Where a module named without a path lies (the table's own convention, said above it)."""


def rows(readme: Path = README) -> list[tuple[str, list[str]]]:
    """(fault, pytest node ids) per row of the "Faults tried" table."""
    text = readme.read_text()
    start = text.index("## Faults tried")
    end = text.index("\n## ", start + 1)
    out: list[tuple[str, list[str]]] = []
    for line in text[start:end].splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 5 or cells[0] in ("fault", "") or set(cells[0]) <= {"-"}:
            continue
        fault, tests = cells[0], cells[-1]
        if tests == "the same":
            out.append((fault, list(out[-1][1])))
            continue
        ids, module = [], None
        for name in re.findall(r"`([^`]+)`", tests):
            path, _, test = name.rpartition("::")
            if path:
                module = path if "/" in path else f"{DEFAULT_FOLDER}/{path}"
            if module is not None and test.startswith("test_"):
                ids.append(f"{module}::{test}")
        out.append((fault, ids))
    return out


def missing(matrix: list[tuple[str, list[str]]]) -> list[str]:
    """The node ids whose module does not exist or defines no such test function."""
    out = []
    for _, ids in matrix:
        for node in ids:
            module, _, test = node.partition("::")
            path = ROOT / module
            if not path.is_file() or not re.search(rf"^def {re.escape(test)}\(", path.read_text(), re.MULTILINE):
                out.append(node)
    return out


def run(matrix: list[tuple[str, list[str]]]) -> int:
    """Each fault's tests in one pytest; one line per fault. 0 when every fault held."""
    failed = 0
    for fault, ids in matrix:
        if not ids:
            print(f"untested: {fault}")
            continue
        res = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", "-rs", *ids],
            cwd=ROOT,
            capture_output=True,
            text=True,
        )
        last = (res.stdout.strip().splitlines() or ["no output"])[-1]
        held = res.returncode == 0 and "skipped" not in last
        failed += res.returncode != 0
        print(f"{'held' if held else ('NOT RUN' if res.returncode == 0 else 'FAILED')}: {fault} ({last.strip('= ')})")
    return 1 if failed else 0


def main(argv: list[str]) -> int:
    matrix = rows()
    gone = missing(matrix)
    if gone:
        print(f"the README's 'Faults tried' names tests that do not exist: {', '.join(gone)}", file=sys.stderr)
        return 1
    if "--run" in argv:
        return run(matrix)
    for fault, ids in matrix:
        print(f"{fault}\n    " + "\n    ".join(ids or ["(untested)"]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
