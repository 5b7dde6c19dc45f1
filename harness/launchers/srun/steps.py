"""What the srun launcher does with a cell's steps beyond planning them (the plans: its backend's `SrunRecipe`,
harness/contracts/recipes/srun.py): the rendezvous port of each cell's step, and why a step failed, read from
srun's own messages. Pure functions.
"""

from __future__ import annotations

import hashlib
import re
import signal

from harness.contracts.rendezvous import PORT_BASE, PORT_SPAN
from harness.procs.supervisor import signal_name


def cell_port(job_id: str, cell_id: str) -> int:
    """Rendezvous port of one cell's step: every cell of a job gets its own (a port the previous step
    just closed may still be in TIME_WAIT), derived without talking to anyone. Same range as
    harness/contracts/rendezvous.port_for_job."""
    digest = int(hashlib.sha1(cell_id.encode()).hexdigest()[:8], 16)
    return PORT_BASE + (int(str(job_id).split("_")[0]) + digest) % PORT_SPAN


# ------------------------------------------------------------------------------- srun's messages

_TASK_EXIT = re.compile(r"task (\d+): Exited with exit code (\d+)")
_TASK_SIGNAL = re.compile(r"task (\d+): (Killed|Terminated|Segmentation fault|Aborted|Bus error)")


_LAUNCH_FAILED = re.compile(r"Task launch for StepId=\S+ failed on node (\S+): ([^\n]+)")


def failure_reason(srun_log: str, code: int | None, role: str = "workers") -> tuple[str, int]:
    """(reason, failing rank) from srun's own messages: a node the step could not start on (its slurmd
    lost: the tasks srun then kills are its consequence), else the first task that exited non-zero, else
    the first that a signal ended, else srun's exit status (pure)."""
    m = _LAUNCH_FAILED.search(srun_log)
    if m:
        node, why = m.group(1), m.group(2).strip()
        return (
            f"the {role} step could not start on node {node} ({why}): its slurmd is down or unreachable; "
            f"see `scontrol show node {node}`, then `--resume --retry-failed` once it is back",
            0,
        )
    m = _TASK_EXIT.search(srun_log)
    if m and m.group(2) != "0":
        rank = int(m.group(1))
        return f"{_who(role)} {rank} died (exit code {m.group(2)})", rank
    m = _TASK_SIGNAL.search(srun_log)
    if m:
        return f"{_who(role)} {int(m.group(1))} died ({signal_name(_SRUN_SIGNALS[m.group(2)])})", int(m.group(1))
    last = [ln for ln in srun_log.splitlines() if ln.strip()][-1:] or ["no message"]
    what = f"exit code {code}" if code is not None and code >= 0 else f"signal {-(code or 0)}"
    return f"{role} step ended ({what}): {last[0].strip()}", 0


_SRUN_SIGNALS = {
    "Killed": signal.SIGKILL,
    "Terminated": signal.SIGTERM,
    "Segmentation fault": signal.SIGSEGV,
    "Aborted": signal.SIGABRT,
    "Bus error": signal.SIGBUS,
}
"""srun's words for the signal that ended a task (its 'task N: Segmentation fault' lines)."""


def _who(role: str) -> str:
    return {"workers": "rank", "servers": "server", "scheduler": "scheduler"}.get(role, "rank")
