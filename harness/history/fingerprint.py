"""A cell's environment fingerprint: the values the regression gate compares for it (harness/gate/comparable.py,
harness/results/fingerprints.fingerprint_keys: CPU model and count, device, GPU driver and topology, Python,
torch, CUDA, NCCL, the number of hosts, the cell's own backend library) and its host heap
(harness/measure/host_heap.py). Never a host name: CI runners change names, `hosts` counts them.

    fid, fields = cell_fingerprint(environment_row, summary_row)   # "3f9a0c1b2d", '{"cpu_count": "2", ...}'

A different fingerprint starts a new series of the cell: a machine change is never a regression.
"""

from __future__ import annotations

import hashlib
import json

from harness.results.fingerprints import fingerprint_keys, fingerprint_value
from harness.results.summarize import row_host_heap

ID_CHARS = 10
"""Length of the short id (hex of sha1): 40 bits, no collision in a history of thousands of machines."""


def fingerprint_fields(environment_row, summary_row) -> dict[str, str]:
    """The readable fields: each compared key's value ("" when absent) and the host heap."""
    backend = summary_row.get("backend") if hasattr(summary_row, "get") else None
    fields = {k: fingerprint_value(environment_row, k) for k in fingerprint_keys(str(backend or "") or None)}
    fields["hosts"] = fields.get("hosts") or "1"
    fields["host_heap"] = row_host_heap(summary_row)
    return fields


def cell_fingerprint(environment_row, summary_row) -> tuple[str, str]:
    """(short id, the fields as sorted JSON)."""
    text = json.dumps(fingerprint_fields(environment_row, summary_row), sort_keys=True)
    return hashlib.sha1(text.encode()).hexdigest()[:ID_CHARS], text


def differences(old_fields: str, new_fields: str) -> str:
    """`key: old -> new; ...` between two fingerprints' JSON fields (what changed the machine)."""
    a, b = json.loads(old_fields or "{}"), json.loads(new_fields or "{}")
    return "; ".join(
        f"{k}: {a.get(k) or 'missing'} -> {b.get(k) or 'missing'}"
        for k in sorted(set(a) | set(b))
        if a.get(k) != b.get(k)
    )
