"""Which cells of two runs are the same cell (docs/ARCHITECTURE.md, "Regression gate"): their axis values
(MATCH_KEYS), normalised, with what older runs recorded before a key existed, and the pairing of cells that
failed before a key was resolved. Pure; the gate (harness/gate/compare.py) and baselines use it."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd

MATCH_KEYS = (
    "workload",
    "scheme",
    "backend",
    "workers",
    "servers",
    "batch_per_worker",
    "seq_len",
    "knobs_json",
    "network",
    "dtype",
    "server_hosts",
    "dist_backend",
)
KEY_DEFAULTS = {"dtype": "fp32", "server_hosts": None, "dist_backend": "gloo"}
"""What a run recorded before a key existed means: every earlier run was fp32, placed its servers by the
rule `auto` now names (an empty value: a cell without servers), and moved its tensors over gloo (before
the column, CUDA cells too joined a gloo group). A cell on NCCL is thus never compared with one on gloo."""
UNRESOLVED = {"server_hosts": ("", "auto"), "dist_backend": ("auto",)}
"""Values of keys a cell resolves only when it runs (where its servers went, the backend its group really
used) that mean "not resolved": what a cell that failed before that point records. `pair_resolved`
matches such a cell to the one resolved cell of the other side that equals it in every other key."""


def _norm(v):
    """A hashable, type-stable form of one axis value: NaN/None -> None, 8.0 -> 8, knob JSON canonical
    (sorted keys, null-valued knobs dropped)."""
    if v is None or (isinstance(v, float) and math.isnan(v)) or v is pd.NA:
        return None
    if isinstance(v, (np.integer,)):
        return int(v)
    if isinstance(v, (float, np.floating)):
        return int(v) if float(v).is_integer() else float(v)
    if isinstance(v, str) and v.startswith("{"):
        try:  # a knob that is unset (null) is the same cell as one without the knob (a knob added later)
            return json.dumps({k: x for k, x in json.loads(v).items() if x is not None}, sort_keys=True)
        except ValueError:
            return v
    return v


def cell_key(row) -> tuple:
    """The identity of a cell across runs: its axis values (MATCH_KEYS), normalised."""
    key = []
    for k in MATCH_KEYS:
        v = _norm(row.get(k))
        if k in UNRESOLVED and v in UNRESOLVED[k]:
            v = None
        elif (v is None or v == "") and k in KEY_DEFAULTS:
            v = KEY_DEFAULTS[k]
        key.append(v)
    return tuple(key)


def cell_label(row, with_knobs: bool = True) -> str:
    """A short human label: workload scheme/backend N=.. S=.. knob=value @network."""
    parts = [f"{row.get('workload')} {row.get('scheme')}"]
    if row.get("backend") not in (None, "torch"):
        parts[0] += f"/{row.get('backend')}"
    parts.append(f"N={_norm(row.get('workers'))}")
    if _norm(row.get("servers")):
        parts.append(f"S={_norm(row.get('servers'))}")
    knobs = _norm(row.get("knobs_json"))
    if with_knobs and knobs and knobs != "{}":
        try:
            parts.append(",".join(f"{k}={v}" for k, v in json.loads(knobs).items()))
        except ValueError:
            parts.append(knobs)
    if row.get("network") not in (None, "loopback"):
        parts.append(f"@{row.get('network')}")
    if _norm(row.get("dist_backend")) not in (None, "", "gloo", "auto"):  # what moved the tensors, if not gloo
        parts.append(f"[{row.get('dist_backend')}]")
    return " ".join(parts)


_RESOLVED_AT = [MATCH_KEYS.index(k) for k in UNRESOLVED]


def pair_resolved(idx: dict, other: dict) -> dict:
    """Keys of `idx` with a key left unresolved (UNRESOLVED: the cell failed before its servers were placed
    or its group was joined) take the resolved values of the one cell of `other` that matches them in
    every other axis."""
    out = {}
    for key, row in idx.items():
        open_at = [i for i in _RESOLVED_AT if key[i] is None]
        if open_at and key not in other:
            twins = [k for k in other if all(a == b for i, (a, b) in enumerate(zip(k, key)) if i not in open_at)]
            if len(twins) == 1 and twins[0] not in idx:
                key = twins[0]
        out[key] = row
    return out
