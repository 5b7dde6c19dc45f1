"""One user of the testbed at a time: a lease (flock on a file in /run) that a sweep, a cell or a
benchmark holds while it runs, and the lock `up`/`down` hold while they change the system."""

from __future__ import annotations

import contextlib
import fcntl
import os

from harness.core.errors import UserError
from harness.testbed import state as st


@contextlib.contextmanager
def _locked():
    with open(st.LOCK_PATH, "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


_LEASE: dict = {"file": None, "depth": 0}


@contextlib.contextmanager
def lease(what: str):
    """Hold the testbed for this process while it runs `what` (a sweep, a cell, a benchmark): a second
    ddlbench process that wants it meanwhile gets a one-line refusal naming the holder, instead of
    reshaping or tearing down links under running ranks. Re-entrant within one process."""
    if _LEASE["depth"]:
        _LEASE["depth"] += 1
        try:
            yield
        finally:
            _LEASE["depth"] -= 1
        return
    f = open(st.LEASE_PATH, "a+")  # noqa: SIM115 - held, with its lock, for the whole lease
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        f.seek(0)
        holder = f.read().strip() or "another process"
        f.close()
        raise UserError(
            f"the emulated testbed is in use by {holder}: there is one per machine; wait for "
            f"that run to finish (or stop it) and try again"
        ) from None
    f.seek(0)
    f.truncate()
    f.write(f"pid {os.getpid()} ({what})")
    f.flush()
    _LEASE.update(file=f, depth=1)
    try:
        yield
    finally:
        _LEASE.update(file=None, depth=0)
        f.truncate(0)
        fcntl.flock(f, fcntl.LOCK_UN)
        f.close()


def lease_holder() -> str | None:
    """Who holds the testbed lease, if another process does (None: free, or held by this process)."""
    if _LEASE["depth"] or not os.path.exists(st.LEASE_PATH):
        return None
    with open(st.LEASE_PATH, "a+") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            f.seek(0)
            return f.read().strip() or "another process"
        fcntl.flock(f, fcntl.LOCK_UN)
    return None
