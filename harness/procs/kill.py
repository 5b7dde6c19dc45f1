"""Ending what a cell started (docs/ARCHITECTURE.md, "What listens where": nothing stays open after a cell):
a process group by SIGKILL, or a framework's launch program and every descendant it started."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess

import psutil


def kill_group(pid: int) -> None:
    """SIGKILL the process group `pid` leads (a rank, the warm-rank zygote), or `pid` alone when it leads
    none yet (a child between fork and setsid)."""
    for kill in (os.killpg, os.kill):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            kill(pid, signal.SIGKILL)


def kill_tree(proc: subprocess.Popen) -> None:
    """Kill a launcher and its descendants. Launchers start ranks in sessions of their own (horovodrun
    does), so killing the launcher's process group alone would leave them running."""
    try:
        kids = psutil.Process(proc.pid).children(recursive=True)
    except psutil.NoSuchProcess:
        kids = []
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGTERM)  # lets the launcher stop its ranks itself
            proc.wait(timeout=5)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            pass
    if proc.poll() is None:
        proc.kill()
    for p in kids:
        with contextlib.suppress(psutil.NoSuchProcess):
            p.kill()
    psutil.wait_procs(kids, timeout=10)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=10)
