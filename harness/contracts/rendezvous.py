"""The rendezvous port of a Slurm job (docs/ARCHITECTURE.md, "Slurm"): what every task of a job derives on its
own, without talking to the others, and what a batch script writes into its `MASTER_PORT` line. The srun
launcher (its tasks' identity and each cell's step port) and the batch scripts agree on it here, so that
neither launcher folder imports the other. Pure."""

from __future__ import annotations

PORT_BASE = 20000
"""Derived rendezvous ports are PORT_BASE + job_id % PORT_SPAN: above the common service ports and
below Linux's default ephemeral range (32768-60999), so an outgoing connection rarely holds one."""
PORT_SPAN = 12000
DEFAULT_PORT = 29500
"""torch.distributed's customary port, used outside any Slurm job id."""


def port_for_job(job_id: int | str | None) -> int:
    """The rendezvous port every task of a job derives on its own, without talking to the others.

    Jobs sharing a node get different ports unless their ids differ by a multiple of PORT_SPAN.
    harness/launchers/sbatch/script.py writes the same formula into job scripts."""
    if job_id is None or str(job_id).strip() == "":
        return DEFAULT_PORT
    return PORT_BASE + int(str(job_id).split("_")[0]) % PORT_SPAN
