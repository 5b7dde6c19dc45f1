"""A rank's log (CELL_DIR/rankN.log) read back for a failed cell's row: its last lines, and the one-line
error the rank printed before it stopped (harness/rank/worker.py prints a UserError so)."""

from __future__ import annotations

from pathlib import Path

LOG_TAIL_LINES = 30
"""Lines of the failing rank's log kept in a failed cell's row."""


def log_tail(cell_dir: Path, first: int = 0, lines: int = LOG_TAIL_LINES) -> str:
    """The last lines of the failing rank's log (then rank 0's), for the failed row."""
    out = []
    names = [f"rank{first}.log"] + (["rank0.log"] if first != 0 else [])
    for name in names:
        path = cell_dir / name
        if path.exists():
            text = path.read_text(errors="replace").splitlines()[-lines:]
            out.append(f"--- {name} ---\n" + "\n".join(text))
    return "\n".join(out)


def rank_error(cell_dir: Path, rank: int) -> str | None:
    """The one-line `error: ...` a rank printed before it stopped (harness/rank/worker.py prints a UserError
    so: a profile naming a missing interface, a refused loopback route), else None."""
    path = cell_dir / f"rank{rank}.log"
    if not path.exists():
        return None
    lines = [ln.strip() for ln in path.read_text(errors="replace").splitlines() if ln.strip().startswith("error: ")]
    return lines[-1].removeprefix("error: ") if lines else None
