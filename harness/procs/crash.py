"""Why a rank stopped, for a failed cell's reason (docs/ARCHITECTURE.md, "Launcher"): what the rank said was
wrong, or where it crashed in native code, read from the Python stack faulthandler writes into every rank's
log (harness/rank/worker.py)."""

from __future__ import annotations

import re
from pathlib import Path

from harness.procs.logs import rank_error


def crash_site(cell_dir: Path, rank: int) -> str | None:
    """Where a rank crashed in native code, from the stack faulthandler wrote into its log (harness/rank/worker.py):
    'Fatal Python error: Segmentation fault, in full_tensor (torch/distributed/...:12), from final_parameters
    (harness/schemes/fsdp.py:99)': the innermost frame and, when that is not the project's, the innermost of
    the project's frames. None when the log has no such stack."""
    path = cell_dir / f"rank{rank}.log"
    if not path.exists():
        return None
    lines = path.read_text(errors="replace").splitlines()
    fatal = [i for i, ln in enumerate(lines) if ln.startswith("Fatal Python error:")]
    if not fatal:
        return None
    frames = []
    for ln in lines[fatal[-1] + 1 :]:
        m = re.match(r'\s*File "(.+)", line (\d+) in (\S+)', ln)
        if m:  # the crashing thread comes first, innermost frame first ("most recent call first")
            frames.append(f"{m.group(3)} ({_short(m.group(1))}:{m.group(2)})")
        elif frames and not ln.strip():
            break  # the end of the crashing thread's stack
    what = lines[fatal[-1]].strip()
    if not frames:
        return what
    ours = next((f for f in frames if "(harness/" in f or "(workloads/" in f), None)
    return f"{what}, in {frames[0]}" + (f", from {ours}" if ours and ours != frames[0] else "")


def _short(path: str) -> str:
    """A source path from the project's package down ('harness/schemes/fsdp.py'), else its last two parts."""
    parts = Path(path).parts
    for root in ("harness", "workloads", "torch", "deepspeed", "horovod"):
        if root in parts:
            return "/".join(parts[parts.index(root) :])
    return "/".join(parts[-2:])


def with_rank_error(reason: str, cell_dir: Path, rank: int | None) -> str:
    """`reason`, followed by what the rank said was wrong when it said so, or where it crashed."""
    said = (rank_error(cell_dir, rank) or crash_site(cell_dir, rank)) if rank is not None else None
    return f"{reason}: {said}" if said else reason
