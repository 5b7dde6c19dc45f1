"""Sending jobs to Slurm and following them: the few client calls ddlbench makes (sbatch, scontrol,
scancel, sinfo), each turning a missing tool or an unreachable controller into a one-line UserError.

    job = submit(batch_script(spec), workdir="runs/ddl")    # sbatch --parsable (harness/launchers/choose.py)
    print(wait_job(job, timeout_s=3600))                    # COMPLETED | FAILED | CANCELLED | TIMEOUT | ...

There is no accounting database on the machines this is tested on, so state comes from
`scontrol show job`, polled (`sbatch --wait` polls too slowly for short jobs).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import time
from pathlib import Path

from harness.core.errors import UserError

FINAL_STATES = frozenset(
    {
        "COMPLETED",
        "FAILED",
        "CANCELLED",
        "TIMEOUT",
        "NODE_FAIL",
        "PREEMPTED",
        "BOOT_FAIL",
        "DEADLINE",
        "OUT_OF_MEMORY",
        "REVOKED",
        "SPECIAL_EXIT",
    }
)
"""Job states after which nothing more happens (`man squeue`, JOB STATE CODES)."""


def slurm_tool(
    tool: str, args: list[str], timeout_s: float = 30.0, cwd: str | Path | None = None, stdin: str | None = None
) -> subprocess.CompletedProcess:
    """Run a Slurm client; a missing tool or an unreachable controller is a UserError."""
    exe = shutil.which(tool)
    if exe is None:
        raise UserError(
            f"`{tool}` is not installed, so jobs cannot be sent to Slurm; run on a Slurm "
            f"login node, or start a local test cluster with slurm/local/up.sh"
        )
    try:
        res = subprocess.run([exe, *args], input=stdin, capture_output=True, text=True, timeout=timeout_s, cwd=cwd)
    except subprocess.TimeoutExpired:
        raise UserError(
            f"`{tool} {' '.join(args)}` got no answer within {timeout_s:.0f} s, so the Slurm "
            f"controller looks unreachable; check `scontrol ping`"
        ) from None
    err = (res.stderr or "").strip()
    if res.returncode != 0 and re.search(
        r"Unable to contact slurm controller|Connection refused|"
        r"Zero Bytes were transmitted|Socket timed out|"
        r"Could not establish a configuration source|"
        r"Invalid authentication credential|Munge",
        err,
        re.I,
    ):
        first = err.splitlines()[0] if err else "no message"
        raise UserError(
            f"the Slurm controller is unreachable ({tool}: {first}); check `scontrol ping` "
            f"and that slurmctld and munged run (locally: slurm/local/up.sh)"
        )
    return res


def submit(script_text: str, workdir: str | Path) -> str:
    """Submit a batch script with `sbatch --parsable`, running in `workdir`; returns the job id.

    The script is also written to workdir/<job name>.sbatch.sh for the record (and for resubmission)."""
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    m = re.search(r"^#SBATCH --job-name=(\S+)", script_text, re.M)
    (workdir / f"{m.group(1) if m else 'job'}.sbatch.sh").write_text(script_text)
    # sbatch does not create the directory of --output; without it the job runs but its log is lost.
    out = re.search(r"^#SBATCH --output=(\S+)", script_text, re.M)
    if out and "%" not in str(Path(out.group(1)).parent):
        (workdir / Path(out.group(1)).parent).mkdir(parents=True, exist_ok=True)
    res = slurm_tool("sbatch", ["--parsable"], cwd=workdir, stdin=script_text)
    if res.returncode != 0:
        first = (res.stderr.strip().splitlines() or ["no message"])[0]
        raise UserError(f"sbatch refused the job: {first}; fix the resources or options it names")
    # --parsable prints "jobid" or "jobid;cluster".
    return res.stdout.strip().split(";")[0]


def job_states(job_id: str | int) -> dict[str, tuple[str, str]]:
    """{job id (array elements as JOB_INDEX): (state, job name)} from `scontrol show job`; {} once Slurm
    forgot the job (after MinJobAge, 300 s by default). The one parser of Slurm's job records."""
    res = slurm_tool("scontrol", ["show", "job", "--oneliner", str(job_id).split("_")[0]])
    out = {}
    for line in (res.stdout or "").splitlines() if res.returncode == 0 else []:
        state = re.search(r"\bJobState=(\S+)", line)
        name = re.search(r"\bJobName=(\S+)", line)
        task = re.search(r"\bArrayTaskId=(\S+)", line)
        jid = re.search(r"\bArrayJobId=(\d+)", line) if task else re.search(r"\bJobId=(\d+)", line)
        if not (state and jid):
            continue
        got = (state.group(1), name.group(1) if name else "")
        if not task:
            out[jid.group(1)] = got
            continue
        # Elements not started yet share one record: ArrayTaskId=0-3%2 or 2,4-5.
        for item in task.group(1).split("%")[0].split(","):
            lo, _, hi = item.partition("-")
            for i in range(int(lo), int(hi or lo) + 1):
                out[f"{jid.group(1)}_{i}"] = got
    return out


def job_state(job_id: str | int) -> str:
    """Current state (PENDING, RUNNING, COMPLETED, FAILED, CANCELLED, ...) of one job or array element;
    "UNKNOWN" once the controller forgot it."""
    states = job_states(job_id)
    key = str(job_id)
    if key in states:
        return states[key][0]
    return next(iter(states.values()))[0] if states and "_" not in key else "UNKNOWN"


def wait_job(job_id: str | int, timeout_s: float, poll_s: float = 0.5) -> str:
    """Poll job_state until a final state (FINAL_STATES) and return it; "UNKNOWN" once the controller
    forgot the job; raises TimeoutError (the job keeps running: cancel() it if you mean to)."""
    deadline = time.monotonic() + timeout_s
    while True:
        state = job_state(job_id)
        if state in FINAL_STATES or state == "UNKNOWN":
            return state
        if time.monotonic() >= deadline:
            raise TimeoutError(f"Slurm job {job_id} still {state} after {timeout_s:.0f} s")
        time.sleep(poll_s)


def cancel(job_id: str | int) -> None:
    """Cancel the job (scancel); a job that already ended is not an error."""
    slurm_tool("scancel", [str(job_id)])


def cpus_per_node(partition: str | None) -> int:
    """The fewest CPUs a node of the partition (default: all) has, from sinfo."""
    res = slurm_tool("sinfo", ["-h", "-o", "%c"] + (["-p", partition] if partition else []))
    counts = [int(x) for x in re.findall(r"\d+", res.stdout or "")]
    if res.returncode != 0 or not counts:
        raise UserError(
            f"sinfo reports no nodes{' in partition ' + partition if partition else ''}; "
            f"check the partition name (`sinfo -s`)"
        )
    return min(counts)
