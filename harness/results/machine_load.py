"""What else the machine was doing while a run measured (docs/ARCHITECTURE.md, "Measurement hygiene").

    watch = Watch(run_dir)     # at the run's start: a snapshot of /proc, nothing waits
    watch.mark()               # after each cell: closes a window of at least WINDOW_S
    cols = watch.finish()      # at its end: {"load_1m_start": .., "others_cores_start": .., ..._end, ..._max}
    busy_reason(env_row)       # "" on a quiet machine, else one sentence naming what was busy

A window is the CPU time every other process used between two snapshots of /proc (utime + stime deltas
of /proc/<pid>/stat) over the window's length. Snapshots are taken only where the driver stands between
cells (the run's start, each cell's end, the run's end), so nothing is read while a cell measures and the
run never waits for a sample (but a run shorter than one window, whose end waits for the rest of it).
Three windows are recorded: the first (start), the last (end: at least WINDOW_S, ending at the run's
end) and the busiest. The run's own processes are left out, so a run never flags itself: this process,
its ancestors and its descendants (the ranks, their launchers), and every process whose command line
names the run directory (ranks that srun or a framework's launch program started, which are not descendants).
The load average (1, 5, 15 min, /proc/loadavg, at the start and the end) is recorded for context only:
it includes the run's own ranks and whatever ran in the minutes before.

`sample(when)` is the blocking form (one window of SAMPLE_S now), for a command that measures no cells.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

SAMPLE_S = 1.0
"""Seconds over which each process's CPU time is sampled: the shortest window."""
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
    name, rest = text[text.find("(") + 1 : text.rfind(")")], text[text.rfind(")") + 2 :].split()
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


def _argv(pid: int) -> list[str]:
    """A process's command line ([] when it is gone or a kernel thread)."""
    try:
        argv = (_PROC / str(pid) / "cmdline").read_bytes().split(b"\0")
    except OSError:
        return []
    return [a.decode(errors="replace") for a in argv if a]


def _command(pid: int, name: str, width: int = 48) -> str:
    """A short command line (`python -m pytest tests/x.py`), else the kernel's process name: "python"
    alone would not say which run or test suite was busy."""
    words = _argv(pid)
    if not words:
        return name
    text = " ".join([Path(words[0]).name, *words[1:]])
    return text if len(text) <= width else text[: width - 3] + "..."


def busy_processes(
    before: dict, after: dict, elapsed_s: float, me: int, ticks_per_s: float, ours: str = ""
) -> list[dict]:
    """Processes outside the run's tree using more than PROCESS_MIN_CORES: name, pid, cores (sorted). A
    process born during the window counts from zero; with `ours` (the run directory), a process whose
    command line names it is the run's own."""
    mine = own_tree(after, me) | own_tree(before, me)
    out = []
    for pid, (name, _, ticks) in after.items():
        if pid in mine:
            continue
        cores = (ticks - before.get(pid, (name, 0, 0))[2]) / ticks_per_s / elapsed_s
        if cores > PROCESS_MIN_CORES and not (ours and any(ours in a for a in _argv(pid))):
            out.append({"name": _command(pid, name), "pid": pid, "cores": round(cores, 2)})
    return sorted(out, key=lambda d: -d["cores"])


def loadavg() -> tuple[float, float, float]:
    try:
        a = (_PROC / "loadavg").read_text().split()
        return float(a[0]), float(a[1]), float(a[2])
    except (OSError, ValueError, IndexError):
        return (float("nan"),) * 3


def sample(when: str, sample_s: float = SAMPLE_S) -> dict:
    """Columns of the environment row for one moment (`when` is "start" or "end"), over `sample_s` from
    now (blocking)."""
    load = loadavg()
    t0, before = time.monotonic(), _snapshot()
    time.sleep(sample_s)
    after, elapsed = _snapshot(), time.monotonic() - t0
    procs = busy_processes(before, after, elapsed, os.getpid(), float(os.sysconf("SC_CLK_TCK")))
    return {**_load_columns(load, when), **_others_columns(procs, when)}


def _load_columns(load: tuple[float, float, float], when: str) -> dict:
    return {f"load_1m_{when}": load[0], f"load_5m_{when}": load[1], f"load_15m_{when}": load[2]}


def _others_columns(procs: list[dict], when: str) -> dict:
    return {f"others_cores_{when}": _cores(procs), f"others_{when}": format_processes(procs)}


def _cores(procs: list[dict]) -> float:
    return round(sum(p["cores"] for p in procs), 2)


class Watch:
    """The load around one run, windowed at the driver's pauses between cells (module docstring)."""

    def __init__(self, run_dir: str | Path | None = None, window_s: float = SAMPLE_S):
        """`run_dir`: processes whose command line names it are the run's own; `window_s`: the shortest
        window."""
        self.ours = str(Path(run_dir).resolve()) if run_dir is not None else ""
        self.window_s = window_s
        self.load_start = loadavg()
        self.opened = (time.monotonic(), _snapshot())
        """(time, snapshot) where the open window began."""
        self.last_closed: tuple[float, dict] | None = None
        """Where the last closed window began (the end window reaches back to it when the open one is short)."""
        self.first: list[dict] | None = None
        self.busiest: list[dict] = []

    def _window(self, since: tuple[float, dict], now: float, snap: dict) -> list[dict]:
        procs = busy_processes(since[1], snap, now - since[0], os.getpid(), float(os.sysconf("SC_CLK_TCK")), self.ours)
        if self.first is None:
            self.first = procs
        if _cores(procs) > _cores(self.busiest):
            self.busiest = procs
        return procs

    def mark(self) -> dict | None:
        """A cell has ended: close the open window when it is at least `window_s` long. Returns the start
        columns when this closed the first window (so that they can be recorded at once), else None."""
        now = time.monotonic()
        if now - self.opened[0] < self.window_s:
            return None
        snap = _snapshot()
        was_first = self.first is None
        self._window(self.opened, now, snap)
        self.last_closed, self.opened = self.opened, (now, snap)
        return self.start_columns() if was_first else None

    def start_columns(self) -> dict:
        return {**_load_columns(self.load_start, "start"), **_others_columns(self.first or [], "start")}

    def finish(self) -> dict:
        """The run has ended: its last window, and every column (start, end, max)."""
        now = time.monotonic()
        since = self.opened
        if now - since[0] < self.window_s:
            if self.last_closed is not None:
                since = self.last_closed  # the last closed window and what followed it
            else:  # the whole run was shorter than one window: wait for the rest of it
                time.sleep(self.window_s - (now - since[0]))
                now = time.monotonic()
        end = self._window(since, now, _snapshot())
        return {
            **self.start_columns(),
            **_load_columns(loadavg(), "end"),
            **_others_columns(end, "end"),
            **_others_columns(self.busiest, "max"),
        }


def merge_resumed(old: dict, new: dict) -> dict:
    """The load columns of a resumed run: the first invocation's start where it recorded one, the busiest
    window of all invocations, the last invocation's end."""
    out = dict(new)
    if recorded(old):
        out.update({k: old[k] for k in new if k.endswith("_start") and k in old})
    if _num(old.get("others_cores_max")) > _num(new.get("others_cores_max")):
        out.update(others_cores_max=old["others_cores_max"], others_max=old.get("others_max", ""))
    return out


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
    """ "" when the run saw a quiet machine (or recorded nothing: runs made before this was recorded),
    else e.g. "other processes used 1.40 cores at the start (pytest[12] 0.95 core, ...)"."""
    parts = []
    for when, where in (("start", "at the start"), ("end", "at the end"), ("max", "in the busiest window")):
        cores = _num(row.get(f"others_cores_{when}"))
        if cores >= BUSY_CORES and (when != "max" or not parts):  # the busiest window is often the start or end
            parts.append(f"{cores:.2f} cores {where} ({row.get(f'others_{when}') or '?'})")
    return ("other processes used " + " and ".join(parts)) if parts else ""


def recorded(row) -> bool:
    """Did this environment row record the machine's load at all (runs before it did not)?"""
    return "others_cores_start" in row and row.get("others_cores_start") == row.get("others_cores_start")


def busy_runs(environment) -> list[str]:
    """One line per run of an environment table measured on a busy machine (empty when all were quiet)."""
    if environment is None or len(environment) == 0:
        return []
    out = []
    for i, (_, r) in enumerate(environment.iterrows()):
        why = busy_reason(r)
        if why:
            out.append(
                f"run {r.get('run', r.get('run_id', i))} was measured on a busy machine: {why}; its "
                f"numbers are disturbed (measure again with nothing else running)"
            )
    return out


def verdict(row) -> str:
    """The environment table's one-word answer: quiet, busy (why), or not recorded."""
    if not recorded(row):
        return "not recorded (run made before the load was recorded)"
    why = busy_reason(row)
    return (
        f"busy: {why}"
        if why
        else (
            f"quiet (other processes below {BUSY_CORES:g} core at start and end"
            f"{' and in every window between' if 'others_cores_max' in row else ''})"
        )
    )
