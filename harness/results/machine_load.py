"""What else the machine was doing while a run measured (docs/ARCHITECTURE.md, "Measurement hygiene").

    snap = sample("start")     # {"load_1m_start": .., "others_cores_start": .., "others_start": "..."}
    busy_reason(env_row)       # "" on a quiet machine, else one sentence naming what was busy

A run samples twice: before its first cell and after its last. A sample is the load average (1, 5, 15
min, /proc/loadavg) and every other process's CPU share over SAMPLE_S seconds (utime + stime deltas of
/proc/<pid>/stat). The run's own process tree (this process, its ancestors and its descendants: the
ranks, their launchers) is left out, so a run never flags itself. The load average is recorded for
context only: it includes the run's own ranks (at the end) and whatever ran in the minutes before.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

SAMPLE_S = 1.0
"""Seconds over which each process's CPU time is sampled."""
PROCESS_MIN_CORES = 0.20
"""A process is listed when it used more than this share of one core during the sample."""
BUSY_CORES = 0.50
"""The machine was busy when the listed processes together used at least this many cores."""

_PROC = Path("/proc")


def _stat(pid: str) -> tuple[str, int, int] | None:
    """(name, ppid, utime + stime in clock ticks) of one process, or None when it is gone."""
    try:
        text = (_PROC / pid / "stat").read_text()
    except OSError:
        return None
    name, rest = text[text.find("(") + 1:text.rfind(")")], text[text.rfind(")") + 2:].split()
    try:  # fields after the name: state ppid ... utime(12th) stime(13th), see proc(5)
        return name, int(rest[1]), int(rest[11]) + int(rest[12])
    except (IndexError, ValueError):
        return None


def _snapshot() -> dict[int, tuple[str, int, int]]:
    out = {}
    try:
        pids = [p for p in os.listdir(_PROC) if p.isdigit()]
    except OSError:
        return out
    for p in pids:
        st = _stat(p)
        if st is not None:
            out[int(p)] = st
    return out


def own_tree(procs: dict[int, tuple[str, int, int]], me: int) -> set[int]:
    """This process, its ancestors and all its descendants (pid -> (name, ppid, ticks) given)."""
    mine = {me}
    p = procs.get(me, ("", 0, 0))[1]
    while p > 1 and p not in mine:  # ancestors: the shell or script that started the run
        mine.add(p)
        p = procs.get(p, ("", 0, 0))[1]
    children: dict[int, list[int]] = {}
    for pid, (_, ppid, _) in procs.items():
        children.setdefault(ppid, []).append(pid)
    todo = [me]
    while todo:
        for c in children.get(todo.pop(), []):
            if c not in mine:
                mine.add(c)
                todo.append(c)
    return mine


def _command(pid: int, name: str, width: int = 48) -> str:
    """A short command line (`python -m pytest tests/x.py`), else the kernel's process name: "python"
    alone would not say which run or test suite was busy."""
    try:
        argv = (_PROC / str(pid) / "cmdline").read_bytes().split(b"\0")
    except OSError:
        return name
    words = [a.decode(errors="replace") for a in argv if a]
    if not words:
        return name
    text = " ".join([Path(words[0]).name] + words[1:])
    return text if len(text) <= width else text[:width - 3] + "..."


def busy_processes(before: dict, after: dict, elapsed_s: float, me: int, ticks_per_s: float) -> list[dict]:
    """Processes outside the run's tree using more than PROCESS_MIN_CORES: name, pid, cores (sorted)."""
    mine = own_tree(after, me) | own_tree(before, me)
    out = []
    for pid, (name, _, ticks) in after.items():
        if pid in mine or pid not in before:
            continue
        cores = (ticks - before[pid][2]) / ticks_per_s / elapsed_s
        if cores > PROCESS_MIN_CORES:
            out.append({"name": _command(pid, name), "pid": pid, "cores": round(cores, 2)})
    return sorted(out, key=lambda d: -d["cores"])


def loadavg() -> tuple[float, float, float]:
    try:
        a = (_PROC / "loadavg").read_text().split()
        return float(a[0]), float(a[1]), float(a[2])
    except (OSError, ValueError, IndexError):
        return (float("nan"),) * 3


def sample(when: str, sample_s: float = SAMPLE_S) -> dict:
    """Columns of the environment row for one moment (`when` is "start" or "end")."""
    load = loadavg()
    t0, before = time.monotonic(), _snapshot()
    time.sleep(sample_s)
    after, elapsed = _snapshot(), time.monotonic() - t0
    procs = busy_processes(before, after, elapsed, os.getpid(), float(os.sysconf("SC_CLK_TCK")))
    return {f"load_1m_{when}": load[0], f"load_5m_{when}": load[1], f"load_15m_{when}": load[2],
            f"others_cores_{when}": round(sum(p["cores"] for p in procs), 2),
            f"others_{when}": format_processes(procs)}


def format_processes(procs: list[dict]) -> str:
    """`python -m pytest tests/x.py [pid 1234] 0.95 core; ...` (command, pid, share), or "" when none."""
    return "; ".join(f"{p['name']} [pid {p['pid']}] {p['cores']:.2f} core" for p in procs)


def _num(v) -> float:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return 0.0
    return 0.0 if f != f else f


def busy_reason(row) -> str:
    """"" when the run saw a quiet machine (or recorded nothing: runs made before this was recorded),
    else e.g. "other processes used 1.40 cores at the start (pytest[12] 0.95 core, ...)"."""
    parts = []
    for when in ("start", "end"):
        cores = _num(row.get(f"others_cores_{when}"))
        if cores >= BUSY_CORES:
            parts.append(f"{cores:.2f} cores at the {when} ({row.get(f'others_{when}') or '?'})")
    return ("other processes used " + " and ".join(parts)) if parts else ""


def recorded(row) -> bool:
    """Did this environment row record the machine's load at all (runs before it did not)?"""
    return "others_cores_start" in row and row.get("others_cores_start") == row.get("others_cores_start")


def busy_runs(env) -> list[str]:
    """One line per run of an environment table measured on a busy machine (empty when all were quiet)."""
    if env is None or len(env) == 0:
        return []
    out = []
    for i, (_, r) in enumerate(env.iterrows()):
        why = busy_reason(r)
        if why:
            out.append(f"run {r.get('run', r.get('run_id', i))} was measured on a busy machine: {why}; its "
                       f"numbers are disturbed (measure again with nothing else running)")
    return out


def verdict(row) -> str:
    """The environment table's one-word answer: quiet, busy (why), or not recorded."""
    if not recorded(row):
        return "not recorded (run made before the load was recorded)"
    why = busy_reason(row)
    return f"busy: {why}" if why else (f"quiet (other processes below {BUSY_CORES:g} core at start and end)")
