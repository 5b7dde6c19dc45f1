"""The parent-death trampoline (docs/ARCHITECTURE.md, "Launcher"): a process this driver starts dies with
it, even when the driver is killed by SIGKILL.

    subprocess.Popen(orphan_proof(argv), ...)
"""

from __future__ import annotations

import os
import shutil

from harness.procs.argv import python_argv

# The trampoline asks the kernel to SIGKILL the rank when its parent (the driver) dies (prctl(2),
# PR_SET_PDEATHSIG = 1; the setting survives execve), then checks that the driver (argv[1]) is still its
# parent: a driver killed between fork and prctl has already handed the rank to a reaper, and would
# never signal it (prctl(2) says to check getppid() after the call). A parent other than the driver is
# accepted only while the driver still runs (a placement prefix that forks). Then it execs the rank.
# A trampoline rather than a preexec_fn: preexec_fn is unsafe in a process with threads (Python's
# subprocess docs), and the progress bar runs one.
_TRAMPOLINE = """import ctypes, os, signal, sys
ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)
driver = int(sys.argv[1])
if os.getppid() != driver:
    try:
        with open(f"/proc/{driver}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        state = "X"
    if state in ("Z", "X"):
        os._exit(70)
os.execv(sys.argv[2], sys.argv[2:])
"""


def orphan_proof(argv: list[str]) -> list[str]:
    """`argv` started behind the parent-death trampoline: it dies with this process, even by SIGKILL."""
    exe = argv[0] if os.path.isabs(argv[0]) else (shutil.which(argv[0]) or argv[0])
    return [*python_argv(), "-c", _TRAMPOLINE, str(os.getpid()), exe, *argv[1:]]
