"""Slurm's compressed notations of a job's nodes and tasks, as every layer reads them: the srun launcher
(harness/launchers/srun/env.py), the backends' srun recipes and the doctor's facts. Pure.

    expand_hostlist("n[1-3,5],gpu07")   # ['n1', 'n2', 'n3', 'n5', 'gpu07']
    expand_tasks_per_node("2(x3),1")    # [2, 2, 2, 1]

The notations are documented in `man srun` ("OUTPUT ENVIRONMENT VARIABLES": SLURM_JOB_NODELIST,
SLURM_TASKS_PER_NODE) and `scontrol show hostnames`.
"""

from __future__ import annotations

import re

_RANGE = re.compile(r"^(\d+)(?:-(\d+))?$")


def _split_top_level(text: str) -> list[str]:
    """Split at commas outside square brackets: 'n[1,3],gpu7' -> ['n[1,3]', 'gpu7']."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "[":
            depth += 1
            if depth > 1:
                raise ValueError(f"nested '[' in hostlist {text!r}")
        elif ch == "]":
            depth -= 1
            if depth < 0:
                raise ValueError(f"unbalanced ']' in hostlist {text!r}")
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    if depth != 0:
        raise ValueError(f"unbalanced '[' in hostlist {text!r}")
    parts.append(text[start:])
    return [p for p in (s.strip() for s in parts) if p]


def _expand_ranges(body: str, hostlist: str) -> list[str]:
    """'01-03,7' -> ['01', '02', '03', '7']; a range keeps the zero padding of its lower bound."""
    out = []
    for item in body.split(","):
        m = _RANGE.match(item.strip())
        if not m:
            raise ValueError(f"bad range {item!r} in hostlist {hostlist!r}")
        lo, hi = m.group(1), m.group(2)
        if hi is None:
            out.append(lo)
            continue
        if int(hi) < int(lo):
            raise ValueError(f"descending range {item!r} in hostlist {hostlist!r}")
        width = len(lo) if lo.startswith("0") else 0
        out.extend(str(n).zfill(width) for n in range(int(lo), int(hi) + 1))
    return out


def _expand_one(pattern: str, hostlist: str) -> list[str]:
    """One comma-free item; several bracket groups multiply out: 'r[1-2]n[1-2]' -> r1n1 r1n2 r2n1 r2n2."""
    m = re.search(r"\[([^\]]*)\]", pattern)
    if not m:
        if "[" in pattern or "]" in pattern:
            raise ValueError(f"unbalanced brackets in hostlist {hostlist!r}")
        return [pattern]
    head, tail = pattern[: m.start()], pattern[m.end() :]
    return [head + mid + rest for mid in _expand_ranges(m.group(1), hostlist) for rest in _expand_one(tail, hostlist)]


def expand_hostlist(hostlist: str) -> list[str]:
    """Slurm's compressed host list as names, in order: 'n[1-3,5],gpu07' -> [n1, n2, n3, n5, gpu07].

    Pure; covers what Slurm prints (prefix, bracketed ranges and singletons with zero padding, several
    bracket groups, comma-separated items). Raises ValueError on malformed input."""
    return [h for item in _split_top_level(hostlist) for h in _expand_one(item, hostlist)]


def expand_tasks_per_node(text: str) -> list[int]:
    """SLURM_TASKS_PER_NODE as one count per node: '2(x3),1' -> [2, 2, 2, 1]."""
    counts = []
    for item in text.split(","):
        m = re.fullmatch(r"\s*(\d+)(?:\(x(\d+)\))?\s*", item)
        if not m:
            raise ValueError(f"bad tasks-per-node {text!r}")
        counts.extend([int(m.group(1))] * int(m.group(2) or 1))
    return counts
