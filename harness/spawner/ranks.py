"""Start ranks and supervise them until they all exit (docs/ARCHITECTURE.md, "Launcher"): each rank warm or
cold (harness/warm/spawn.py), under the one supervisor (harness/procs/supervisor.py); the cell ends on the
first failure or at its timeout (a crashed or hung rank never hangs the sweep).

No rank outlives the driver (docs/ARCHITECTURE.md, "Launching"): ranks run in sessions of their own and are
killed by process group when the cell ends, fails or is interrupted (SIGTERM/SIGINT reach the `finally` as
exceptions, see harness.core.errors.signals_raise), and the kernel kills them if the driver itself is
SIGKILLed (the parent-death signal, harness/procs/trampoline.py).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Callable
from pathlib import Path

from harness.contracts.cell import CellSpec
from harness.core.errors import CellFailed
from harness.procs.crash import with_rank_error
from harness.procs.logs import log_tail
from harness.procs.supervisor import Ended, Proc, how, watch
from harness.warm import spawn
from harness.warm.spawn import RankStart


def run_ranks(
    cell: CellSpec,
    cell_dir: Path,
    ranks: dict[int, RankStart],
    abort: Callable[[], str | None] = lambda: None,
    poll_s: float = 0.05,
) -> None:
    """Start each rank (its output in CELL_DIR/rank<r>.log, in a session of its own; warm or cold,
    warm/spawn.py) and hand them to the one supervisor until they all exit; CellFailed when one fails,
    the cell times out, or `abort()` gives a reason. Every rank started here is killed when this returns
    or raises. The spawner's cells (cell.py) and the multi-node launcher's nodes start their ranks here."""
    procs: dict[int, subprocess.Popen] = {}
    logs = []
    try:
        for r, rank in ranks.items():
            path = cell_dir / f"rank{r}.log"
            log = open(path, "w")  # noqa: SIM115 - the rank writes it until the end; closed below
            logs.append(log)
            procs[r] = spawn.start(rank, path, log)
        _watch(procs, cell.timeout_s, cell_dir, abort, poll_s)
    finally:
        _kill(list(procs.values()))
        for log in logs:
            log.close()


def _watch(
    procs: dict[int, subprocess.Popen],
    timeout_s: float,
    cell_dir: Path,
    abort: Callable[[], str | None] = lambda: None,
    poll_s: float = 0.05,
) -> None:
    """The ranks under the one supervisor (procs/supervisor.py); CellFailed when the cell fails."""

    def died(r: int):
        return lambda code: Ended(with_rank_error(f"rank {r} died ({how(code)})", cell_dir, r), r)

    def timed_out(running: list[Proc]) -> Ended:
        left = [int(p.name.split()[1]) for p in running]
        return Ended(f"timed out after {timeout_s:g} s with rank(s) {left} still running", left[0])

    try:
        watch(
            [Proc(p, f"rank {r}", f"rank{r}.log", died(r)) for r, p in procs.items()],
            timeout_s,
            cell_dir,
            timed_out,
            abort=abort,
            poll_s=poll_s,
        )
    except Ended as e:
        first = e.rank if e.rank is not None else min(procs, default=None)
        raise CellFailed(e.reason, log_tail(cell_dir, first=first) if first is not None else "") from None


def _kill(procs: list[subprocess.Popen]) -> None:
    for p in procs:
        if p.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGKILL)
    for p in procs:
        with contextlib.suppress(subprocess.TimeoutExpired):
            p.wait(timeout=10)
