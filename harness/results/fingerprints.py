"""What the regression gate compares of two environments, without torch (docs/ARCHITECTURE.md, "Regression
gate"): the keys that can change a cell's numbers (COMMON_KEYS and the cell's own backend library,
`fingerprint_keys`), the compared form of each value (`fingerprint_value`: hosts as a count, never a name),
and the run's short `fingerprint` hash. harness/results/environment.py records the values (and imports torch
to read them); the gate and the history (harness/history/fingerprint.py) only read them, so a command that
compares or searches stored runs starts without torch.
"""

from __future__ import annotations

import hashlib
import json

COMMON_KEYS = (
    "python",
    "torch",
    "cuda",
    "nccl",
    "device",
    "device_name",
    "device_count",
    "cpu_model",
    "cpu_count",
    "hosts",
    "gpu_driver",
    "gpu_topology",
)
"""Compared for every cell. gpu_driver/gpu_topology are absent on CPU (absent on both sides = equal)."""
LEGACY_LIBRARIES = ("horovod", "deepspeed", "byteps")
"""The library columns of runs recorded before the row listed its `libraries`."""


def fingerprint_keys(backend: str | None = None) -> tuple[str, ...]:
    """What can change the numbers of a cell of `backend`: COMMON_KEYS plus its own library's column (named
    after it; absent on both sides when the backend records none, which compares equal)."""
    return COMMON_KEYS + ((backend,) if backend and backend not in COMMON_KEYS else ())


def library_columns(row) -> tuple[str, ...]:
    """The row's backend library columns (`libraries`; the legacy set for runs from before it)."""
    listed = row.get("libraries") if hasattr(row, "get") else None
    if isinstance(listed, str):
        return tuple(c for c in listed.split(",") if c)
    return LEGACY_LIBRARIES


def fingerprint_value(row, key: str) -> str:
    """The compared form of one key: "" when absent or empty; hosts as a count (names change)."""
    v = row.get(key) if hasattr(row, "get") else None
    if v is None or (isinstance(v, float) and v != v):
        return ""
    if key == "hosts":
        return str(len(str(v).split(","))) if str(v) else "1"
    return str(v)


def fingerprint(row: dict) -> str:
    key = {k: fingerprint_value(row, k) for k in COMMON_KEYS + library_columns(row)}
    key["hosts"] = key["hosts"] or "1"
    return hashlib.sha1(json.dumps(key, sort_keys=True).encode()).hexdigest()[:12]
