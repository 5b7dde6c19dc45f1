"""The one way ddlbench writes a file: to a hidden temporary beside it, then rename (docs/ARCHITECTURE.md,
"Results"). A reader never sees half a file, and an interrupted writer leaves the old file intact.

    write_text_atomic(path, text)      write_json_atomic(path, obj)      write_parquet_atomic(df, path)
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any


def _tmp_beside(path: Path) -> Path:
    return path.with_name(f".{path.name}.tmp{os.getpid()}")


def replace_atomic(path: str | Path, write: Callable[[Path], None]) -> Path:
    """Call `write(tmp)` on a temporary beside `path`, then rename it onto `path`; on any failure the
    temporary is removed and `path` is left as it was."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = _tmp_beside(path)
    try:
        write(tmp)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


def write_text_atomic(path: str | Path, text: str) -> Path:
    return replace_atomic(path, lambda tmp: tmp.write_text(text))


def write_json_atomic(path: str | Path, obj: Any, indent: int | None = None) -> Path:
    return write_text_atomic(path, json.dumps(obj, indent=indent) + ("\n" if indent else ""))


def write_parquet_atomic(df, path: str | Path) -> Path:
    """A pandas DataFrame as Parquet, without its index."""
    return replace_atomic(path, lambda tmp: df.to_parquet(tmp, index=False))
