"""The one supervisor of a cell's processes (docs/ARCHITECTURE.md, "Launcher"): every launcher (local
ranks, srun steps, a framework's own launch program, a node's ranks in a multi-node job) starts its processes
and hands them to `watch`, which waits for them, applies the one rule for the cell's outcome
(`Shutdown`) and raises `Ended` when the cell fails. The launcher kills what is left and turns `Ended`
into CellFailed with its own log tail.

`Shutdown`: once rank 0 has written result.json the measurement is complete, so a process that then
fails or hangs while shutting down is a warning on the row (its reason and log line), not a failed cell.

Generic: it knows no backend and no launcher.
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from harness.core.atomic import write_json_atomic

SHUTDOWN_GRACE_S = 60.0
"""Once result.json is written, how long the ranks may take to leave (within the cell's timeout) before
the rest are killed and the row says so: leaving takes a few seconds (destroying the process group)."""


def last_line(cell_dir: Path, name: str) -> str:
    """The last non-empty line of CELL_DIR/NAME (a traceback's ends with the exception), else ""."""
    path = cell_dir / name
    lines = path.read_text(errors="replace").splitlines() if path.exists() else []
    return next((ln.strip() for ln in reversed(lines) if ln.strip()), "")


class Shutdown:
    """A cell's outcome at its end (module docstring): a launcher's watch loop asks `complete()` when a
    rank fails and `expired()` while any runs, reports late failures with `late()`, and calls `record()`
    once every process has ended or been killed."""

    def __init__(self, cell_dir: Path, timeout_s: float):
        self.result = cell_dir / "result.json"
        self.deadline = time.monotonic() + timeout_s
        self.completed_at: float | None = None
        self.warnings: list[dict] = []

    def complete(self) -> bool:
        """Whether rank 0 has written result.json (atomically: it is whole once it exists)."""
        if self.completed_at is None and self.result.exists():
            self.completed_at = time.monotonic()
        return self.completed_at is not None

    def expired(self) -> bool:
        """Past the cell's timeout, or past the shutdown grace once the result is complete."""
        now = time.monotonic()
        return now > self.deadline or (self.complete() and now > self.completed_at + SHUTDOWN_GRACE_S)

    def late(self, warning: str, log_line: str = "") -> None:
        """Something failed after the result was complete."""
        self.warnings.append({"warning": warning, "log": log_line})

    def record(self) -> None:
        """Write the warnings into result.json (`warnings`), from where they reach the row."""
        if not self.warnings or not self.result.exists():
            return
        data = json.loads(self.result.read_text())
        data.setdefault("warnings", []).extend(self.warnings)
        write_json_atomic(self.result, data)


class Ended(Exception):
    """The cell failed: the reason, and the rank whose log matters most (None: every rank's)."""

    def __init__(self, reason: str, rank: int | None):
        super().__init__(reason)
        self.reason, self.rank = reason, rank


@dataclass
class Proc:
    """One process a launcher started (a rank, an srun step, a framework launcher)."""

    popen: subprocess.Popen
    name: str
    """How the row names it: "rank 3", "the servers step", "horovodrun"."""
    log: str
    """Its log file in the cell directory (its last line goes on a warning)."""
    failure: Callable[[int], Ended]
    """exit code -> why the cell failed (read from its log where the launcher can)."""
    main: bool = True
    """The cell is over when every main process has exited; a helper (a server step) ending before
    them fails the cell."""


NATIVE_CRASH = {
    signal.SIGSEGV: "crash in native code",
    signal.SIGBUS: "crash in native code",
    signal.SIGILL: "crash in native code",
    signal.SIGFPE: "crash in native code",
    signal.SIGABRT: "aborted in native code",
}
"""Signals that end a process from inside native code (a C++ extension, a CUDA or communication library):
the rank's Python stack is in its log, written by faulthandler (harness/rank/worker.py)."""


def signal_name(number: int) -> str:
    """'SIGSEGV: crash in native code', 'SIGKILL', or 'signal 77' for a number without a name."""
    try:
        sig = signal.Signals(number)
    except ValueError:
        return f"signal {number}"
    return f"{sig.name}: {NATIVE_CRASH[sig]}" if sig in NATIVE_CRASH else sig.name


def how(code: int) -> str:
    return signal_name(-code) if code < 0 else f"exit code {code}"


FAILURE_SETTLE_S = 0.3
"""When a process has failed, how long the others' exits may take to arrive (a warm rank's comes through its
zygote) before the supervisor names the first to fail: the cause, not a peer that lost it."""


def _failed(procs: list[Proc], seen: dict[int, float], late: set[int]) -> list[int]:
    """Indices of the processes that have failed (or, a helper, ended early), noting when each was first seen."""
    running_main = any(q.main and q.popen.poll() is None for q in procs)
    out = []
    for i, p in enumerate(procs):
        code = p.popen.poll()
        if i not in late and (code not in (None, 0) or (code == 0 and not p.main and running_main)):
            seen.setdefault(i, time.monotonic())
            out.append(i)
    return out


def _first_to_fail(procs: list[Proc], seen: dict[int, float], late: set[int]) -> Ended:
    """Why the cell failed: the process that ended first (by the time its zygote reaped it where known, else
    when this supervisor first saw it), after FAILURE_SETTLE_S for the others' exits to arrive."""
    before = _failed(procs, seen, late)
    time.sleep(FAILURE_SETTLE_S)
    failed = set(before) | set(_failed(procs, seen, late))  # a helper that ended early stays the cause
    first = min(failed, key=lambda i: (getattr(procs[i].popen, "ended_at", None) or seen[i], i))
    return procs[first].failure(procs[first].popen.poll())


def watch(
    procs: list[Proc],
    timeout_s: float,
    cell_dir: Path,
    timed_out: Callable[[list[Proc]], Ended],
    abort: Callable[[], str | None] = lambda: None,
    poll_s: float = 0.05,
) -> None:
    """Until every main process has ended: one failing, a helper ending first, `abort()` giving a reason,
    or the timeout raise Ended (`timed_out(still running)` says why), unless result.json is complete by
    then, which makes it a warning written into result.json."""
    end = Shutdown(cell_dir, timeout_s)
    late: set[int] = set()
    seen: dict[int, float] = {}
    while True:
        running = [p for p in procs if p.popen.poll() is None]
        for i, p in enumerate(procs):
            code = p.popen.poll()
            early = code == 0 and not p.main and any(q.main for q in running)
            if i in late or not (code not in (None, 0) or early):
                continue
            if not end.complete():
                raise _first_to_fail(procs, seen, late)
            late.add(i)
            if code != 0:
                end.late(
                    f"{p.name} failed while shutting down ({how(code)}) after result.json was written",
                    last_line(cell_dir, p.log),
                )
        mains = [p.popen.poll() for p in procs if p.main]
        if None not in mains and (set(mains) <= {0} or end.complete()):
            break
        why = abort()
        if why and not end.complete():
            raise Ended(why, None)
        if end.expired():
            if not end.complete():
                raise timed_out(running)
            end.late(
                f"{', '.join(p.name for p in running)} still running {SHUTDOWN_GRACE_S:g} s after "
                f"result.json was written; killed",
                last_line(cell_dir, running[0].log) if running else "",
            )
            break
        time.sleep(poll_s)
    end.record()
