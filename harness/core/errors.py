"""How a command ends when it does not succeed, each caught once by the CLI (docs/ARCHITECTURE.md,
"Commands"): a mistake the user can fix (UserError: one line, exit status 2), a run that cannot go on
(RunFailed: one line, exit status 1), a signal that stopped the driver (Interrupted: one line, exit status
128+N); and CellFailed, a cell's failure, which a sweep records and goes on from."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from pathlib import Path


class UserError(Exception):
    """A mistake the user can fix. The message says what, why, and how to fix it."""

    exit_code = 2


class CellFailed(Exception):
    """A benchmark cell did not complete (a rank crashed, hung, or raised). Recorded, never fatal to a sweep."""

    def __init__(self, reason: str, log_tail: str = ""):
        super().__init__(reason)
        self.reason = reason
        self.log_tail = log_tail


class RunFailed(Exception):
    """A command's run cannot go on (the one cell it measures failed, a node of the job was lost); what was
    measured before stays on disk. The message says what failed and where its logs are."""

    exit_code = 1


class Interrupted(BaseException):
    """The driver got SIGTERM or SIGINT (a CI cancel, `timeout`, the end of a Slurm job, Ctrl-C).
    A BaseException, like KeyboardInterrupt, so that no `except Exception` swallows it. On its way up it
    learns the run directory it stopped (`run_dir`) and what became of the running cell (`stopped`)."""

    def __init__(self, signum: int, run_dir: Path | None = None):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum
        self.run_dir = run_dir
        """The run directory whose run the signal stopped; None where the command has none."""
        self.stopped = ""
        """What became of the work that was running ("the running cell's ranks were stopped and ..."),
        said by the code that ran it; empty: nothing that needs saying."""

    @property
    def exit_code(self) -> int:
        return 128 + self.signum  # the shell's convention for "killed by signal N"

    def line(self, go_on: str) -> str:
        """The one line a command ends with: what the signal stopped and how to go on (`go_on`, where
        `{run_dir}` stands for the run directory; with no run directory yet: run it again)."""
        if "{run_dir}" in go_on and self.run_dir is None:
            go_on = "nothing was recorded yet; run it again"
        stopped = f": {self.stopped}" if self.stopped else ""
        return f"interrupted by {self}{stopped}; {go_on.format(run_dir=self.run_dir)}"


@contextlib.contextmanager
def signals_raise(run_dir: Path | None = None) -> Iterator[None]:
    """While inside: SIGTERM and SIGINT raise Interrupted (naming `run_dir`, the run this block writes, when
    given) in the main thread, so that `finally` blocks kill the ranks; later ones are ignored while that
    cleanup runs, up through the enclosing blocks. Nested blocks: the innermost that names a run names it.
    Elsewhere (threads) a no-op."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught = (signal.SIGTERM, signal.SIGINT)
    before = {s: signal.getsignal(s) for s in caught}
    fired = []

    def handler(signum, _frame):
        fired.append(signum)
        for s in caught:
            signal.signal(s, signal.SIG_IGN)
        raise Interrupted(signum, run_dir)

    handler.raises = True  # an enclosing block's handler is not put back once a signal has fired
    for s in caught:
        signal.signal(s, handler)
    try:
        yield
    except Interrupted as e:  # raised by an inner block's handler that named no run: this block's run
        e.run_dir = e.run_dir or run_dir
        raise
    finally:
        for s, h in before.items():
            signal.signal(s, signal.SIG_IGN if fired and getattr(h, "raises", False) else h)
