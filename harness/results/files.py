"""Reading tables and checking where results go, with one-line errors (docs/ARCHITECTURE.md, "Tidy tables").

    df = read_table(path)                      # a Parquet file; truncated/garbage -> UserError naming it
    check_output_dir(path, "--output")         # before any work: refuse a file, or an unwritable place
    check_output_file(path, "-o")
    raise unwritable(err, "run directory X", "make it writable, then resume with --resume")

Writing stays with harness/core/atomic.py (the one atomic writer); this module only reads and checks.
"""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd
import pyarrow

from harness.core.errors import UserError


def read_table(path: str | Path, columns: list[str] | None = None, fix: str = "") -> pd.DataFrame:
    """A Parquet table; a missing, truncated or foreign file is a UserError that names it and says how
    to fix it (pyarrow's own message, e.g. "Parquet magic bytes not found", is kept as the why)."""
    p = Path(path)
    try:
        return pd.read_parquet(p, columns=columns)
    except (pyarrow.ArrowException, OSError, ValueError) as e:
        why = str(e).split(": ", 1)[-1].split(". ")[0].strip() or type(e).__name__
        raise UserError(
            f"cannot read table {p} ({why}): it is truncated or not a Parquet table; "
            f"{fix or 'make it again with the command that wrote it'}, or remove it"
        ) from None


def _first_existing(p: Path) -> Path:
    p = p.absolute()
    while not p.exists() and p != p.parent:
        p = p.parent
    return p


def _writable(d: Path) -> bool:
    """Can we create entries in directory d? os.access misses root, read-only mounts and immutable
    directories (chattr +i), so try it."""
    if not os.access(d, os.W_OK | os.X_OK):
        return False
    probe = d / f".ddlbench-write-probe.{os.getpid()}"
    try:
        probe.touch()
        probe.unlink()
        return True
    except OSError:
        return False


def check_output_dir(path: str | Path, option: str = "--output") -> Path:
    """Refuse (before any work) an output directory that is a file, lies under a file, or cannot be
    created or written."""
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise UserError(f"{option} {p} is a file, not a directory: give a directory path (it is created)")
    base = _first_existing(p)
    if not base.is_dir():
        raise UserError(f"{option} {p} lies under {base}, which is a file: give a path under a directory")
    if not _writable(base):
        raise UserError(
            f"{option} {p}: cannot write in {base} (permission denied or read-only); choose a "
            f"writable place or fix its permissions"
        )
    return p


def check_output_file(path: str | Path, option: str = "--output") -> Path:
    """Refuse (before any work) an output file that is a directory, lies under a file, or cannot be
    written."""
    p = Path(path)
    if p.is_dir():
        raise UserError(f"{option} {p} is a directory: give a file path, e.g. {p / 'out'}")
    base = _first_existing(p.parent)
    if not base.is_dir():
        raise UserError(f"{option} {p} lies under {base}, which is a file: give a path under a directory")
    if not _writable(base) or (p.exists() and not os.access(p, os.W_OK)):
        raise UserError(
            f"{option} {p}: cannot write there (permission denied or read-only); choose a "
            f"writable place or fix its permissions"
        )
    return p


def unwritable(err: OSError, what: str, fix: str) -> UserError:
    """An OSError met while writing results, as a one-line UserError: what, why (the OS), how to fix. The why is
    the C library's words for the errno where there is one (pyarrow's own text wraps them: "Error writing
    bytes to file. Detail: [errno 28] ...")."""
    where = f" ({err.filename})" if err.filename else ""
    why = os.strerror(err.errno) if err.errno else (err.strerror or err)
    return UserError(f"cannot write {what}{where}: {why}; {fix}")
