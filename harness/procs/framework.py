"""One cell whose ranks a framework's own launch program starts (horovodrun, the deepspeed launch program), on one box
(docs/ARCHITECTURE.md, "Launching"): the backend builds that launcher's argv and environment (its
`LocalRecipe`), and `run_supervised` runs it as one process tree under the cell's timeout, watched by the one
supervisor (harness/procs/supervisor.py), killed with everything it started when the cell ends, and a failure
turned into CellFailed with the log's tail. The launcher's combined output (all ranks) goes to
CELL_DIR/rank0.log.

Generic: it knows no backend.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from harness.core.errors import CellFailed
from harness.procs.argv import write_cell
from harness.procs.kill import kill_tree
from harness.procs.logs import log_tail
from harness.procs.supervisor import Ended, Proc, how, watch
from harness.procs.trampoline import orphan_proof


def prepare_cell_dir(cell, cell_dir: Path, placement) -> Path:
    """The cell directory with cell.json, for a launcher that runs on one box only."""
    if placement is not None and (placement.prefixes or placement.nodes > 1):
        raise CellFailed(
            "this backend's launcher runs on one box only; the testbed/multi-node placement is not supported for it", ""
        )
    cell_dir = cell_dir.resolve()
    write_cell(cell, cell_dir)
    return cell_dir


def run_supervised(argv: list[str], env: dict, timeout_s: float, cell_dir: Path, what: str) -> Path:
    """Run `argv` (a launcher that starts every rank) in CELL_DIR; return result.json or raise CellFailed."""
    cell_dir = cell_dir.resolve()
    result = cell_dir / "result.json"
    result.unlink(missing_ok=True)
    with open(cell_dir / "rank0.log", "w") as log:
        log.write("$ " + " ".join(argv) + "\n")
        log.flush()
        proc = subprocess.Popen(
            orphan_proof(argv), stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
        try:
            watch(
                [Proc(proc, what, "rank0.log", lambda code: Ended(f"{what} failed ({how(code)})", None))],
                timeout_s,
                cell_dir,
                lambda running: Ended(f"{what} timed out after {timeout_s:g} s", None),
                poll_s=0.1,
            )
        except Ended as e:
            kill_tree(proc)  # first, so that the tail holds what the ranks printed last
            raise CellFailed(e.reason, log_tail(cell_dir)) from None
        finally:
            kill_tree(proc)  # stragglers (a launcher may exit before all of its ranks)
    if not result.exists():
        raise CellFailed(f"{what} finished without rank 0 writing result.json", log_tail(cell_dir))
    return result
