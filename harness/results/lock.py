"""One writer per run directory (docs/ARCHITECTURE.md, "Data path": run_cells locks the run dir).

    with run_lock(run_dir, "ddlbench sweep quick.yaml"):
        ...   # a second process gets a UserError naming this one's pid and command

An advisory `fcntl.flock` on `<run_dir>/.lock` (flock(2)): the kernel drops it when the holder exits,
however it exits (SIGKILL included), so a stale lock never needs cleaning up. Every command takes it
through execute.run_cells (which also prepares the directory); it stays re-entrant within one process
for library callers that hold it around a run_cells of their own.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shlex
import sys
from collections.abc import Iterator
from pathlib import Path

from harness.core.errors import UserError
from harness.results.files import unwritable

LOCK_NAME = ".lock"
_held: dict[Path, int] = {}  # run dir -> depth of nested run_lock in this process


def _command() -> str:
    return " ".join(shlex.quote(a) for a in [Path(sys.argv[0]).name, *sys.argv[1:]])


@contextlib.contextmanager
def run_lock(run_dir: Path, command: str | None = None) -> Iterator[None]:
    key = Path(run_dir).resolve()
    if key in _held:
        _held[key] += 1
        try:
            yield
        finally:
            _held[key] -= 1
        return
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(run_dir / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as e:
        raise unwritable(e, f"run directory {run_dir}", "choose a writable --output or fix its permissions") from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 4096, 0).decode(errors="replace").strip() or "another process"
            raise UserError(
                f"run directory {run_dir} is being written by {holder}: wait for it to finish, or give another --output"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()} ({command or _command()})\n".encode(), 0)
        _held[key] = 1
        try:
            yield
        finally:
            del _held[key]
            os.ftruncate(fd, 0)
    finally:
        os.close(fd)  # closing the descriptor releases the flock
