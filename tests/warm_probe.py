"""A rank stand-in for tests/integration/processes/test_warm_pool.py: reports what a process started by the warm pool
(or fresh) sees, as JSON, to the file after --report.

    python -P -m warm_probe --report OUT.json [--sleep S] [--worker --cell CELL.json --out DIR]

With --worker it first runs harness.rank.worker.main on the rest of the arguments (a real cell) and reports
the thread counts the worker left torch with."""

from __future__ import annotations

import json
import os
import signal
import sys
import time

import torch


def snapshot() -> dict:
    return {
        "pid": os.getpid(),
        "ppid": os.getppid(),
        "sid": os.getsid(0),
        "pgid": os.getpgid(0),
        "netns": os.readlink("/proc/self/ns/net"),
        "cwd": os.getcwd(),
        "marker": os.environ.get("WARM_PROBE_MARKER", ""),
        "sys_path": sys.path[:4],
        "threads": torch.get_num_threads(),
        "interop_threads": torch.get_num_interop_threads(),
        "sigint": getattr(signal.getsignal(signal.SIGINT), "__name__", str(signal.getsignal(signal.SIGINT))),
        "sigterm": str(signal.getsignal(signal.SIGTERM)),
        "sigchld": str(signal.getsignal(signal.SIGCHLD)),
        "stdout_isatty": sys.stdout.isatty(),
        "argv": sys.argv,
        "fds": fds(),
    }


def fds() -> dict:
    """Open file descriptors and what they point at (the report file, opened later, is not among them)."""
    out = {}
    for fd in sorted(os.listdir("/proc/self/fd"), key=int):
        try:
            out[int(fd)] = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
    return out


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    report = argv[argv.index("--report") + 1]
    sleep = float(argv[argv.index("--sleep") + 1]) if "--sleep" in argv else 0.0
    code = 0
    if "--worker" in argv:
        from harness.rank import worker

        code = worker.main(argv[argv.index("--worker") + 1 :])
    out = snapshot()
    out["worker_exit"] = code
    with open(report, "w") as f:
        json.dump(out, f)
    print("probe reported", flush=True)
    time.sleep(sleep)
    return int(os.environ.get("WARM_PROBE_EXIT", "0"))


if __name__ == "__main__":
    sys.exit(main())
