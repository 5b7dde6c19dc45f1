"""The per-task shim of the srun launcher: give one task the variables its framework reads, then exec.

    python -m harness.launch.srun_task torch -- python -m harness.worker --cell C --out D

harness.launch.srun puts this in front of each rank's argv for backends that do not read SLURM_*:
  torch       RANK, WORLD_SIZE, LOCAL_RANK, ... (torchrun's names; deepspeed.init_distributed reads them)
  horovod     HOROVOD_RANK, HOROVOD_LOCAL_RANK, HOROVOD_CROSS_RANK, ... and the gloo controller
              (the variables horovodrun gives each slot: horovod/runner/gloo_run.py)
  horovodrun  the reverse, under horovodrun: RANK & co. from HOROVOD_*, and the batch step's SLURM_*
              dropped, so that harness.launch.env takes the rank from Horovod and not from Slurm
  byteps      DMLC_ROLE=worker, DMLC_WORKER_ID, BYTEPS_LOCAL_RANK/SIZE
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from pathlib import Path
from typing import Mapping

from harness.errors import UserError
from harness.launch.slurm_env import expand_tasks_per_node, from_slurm


def task_env(style: str, environ: Mapping[str, str]) -> dict[str, str | None]:
    """Variables the shim sets (None = unset) for one task of `style`, from its SLURM_* (pure but for
    the Horovod network interface, looked up when GLOO_SOCKET_IFNAME does not name one)."""
    if style == "horovodrun":  # horovodrun started us: its rank wins over the batch step's SLURM_*
        r, size = environ["HOROVOD_RANK"], environ["HOROVOD_SIZE"]
        out: dict[str, str | None] = {k: None for k in environ if k.startswith("SLURM_")}
        out.update(RANK=r, WORLD_SIZE=size, LOCAL_RANK=environ["HOROVOD_LOCAL_RANK"],
                   LOCAL_WORLD_SIZE=environ["HOROVOD_LOCAL_SIZE"], NODE_RANK=environ["HOROVOD_CROSS_RANK"],
                   DDLBENCH_LAUNCHER="horovodrun")
        return out
    e = from_slurm(environ)
    if style == "torch":  # deepspeed.init_distributed and torchrun-style code read these
        return {"RANK": str(e.rank), "WORLD_SIZE": str(e.world_size), "LOCAL_RANK": str(e.local_rank),
                "LOCAL_WORLD_SIZE": str(e.local_world_size), "NODE_RANK": str(e.node_rank),
                "MASTER_ADDR": e.master_addr, "MASTER_PORT": str(e.master_port), "DDLBENCH_LAUNCHER": "slurm"}
    if style == "horovod":
        counts = expand_tasks_per_node(environ.get("SLURM_STEP_TASKS_PER_NODE")
                                       or environ.get("SLURM_TASKS_PER_NODE", str(e.world_size)))
        # Horovod's cross communicator joins the ranks with the same local rank, one per node
        # (horovod.runner.common.util.hosts.get_host_assignments); block placement makes those
        # nodes a prefix of the node list.
        cross_size = sum(1 for c in counts if c > e.local_rank)
        iface = environ.get("GLOO_SOCKET_IFNAME") or _iface_towards(environ["HOROVOD_GLOO_RENDEZVOUS_ADDR"])
        return {"HOROVOD_RANK": str(e.rank), "HOROVOD_SIZE": str(e.world_size),
                "HOROVOD_LOCAL_RANK": str(e.local_rank), "HOROVOD_LOCAL_SIZE": str(e.local_world_size),
                "HOROVOD_CROSS_RANK": str(e.node_rank), "HOROVOD_CROSS_SIZE": str(cross_size),
                "HOROVOD_HOSTNAME": environ.get("SLURMD_NODENAME", socket.gethostname()),
                "HOROVOD_CONTROLLER": "gloo", "HOROVOD_CPU_OPERATIONS": "gloo", "HOROVOD_GLOO_IFACE": iface}
    if style == "byteps":  # BytePS counts worker machines; a worker's place in its machine is local
        return {"DMLC_ROLE": "worker", "DMLC_WORKER_ID": str(e.node_rank),
                "BYTEPS_LOCAL_RANK": str(e.local_rank), "BYTEPS_LOCAL_SIZE": str(e.local_world_size)}
    raise UserError(f"unknown task environment style {style!r}; use torch, horovod, horovodrun or byteps")


def _iface_towards(addr: str) -> str:
    """The network interface this host uses to reach `addr` (`ip route get`), else lo."""
    try:
        out = subprocess.run(["ip", "-o", "route", "get", addr], capture_output=True, text=True, timeout=5).stdout
    except (OSError, subprocess.TimeoutExpired):
        return "lo"
    m = re.search(r"\bdev (\S+)", out)
    return m.group(1) if m else "lo"


def main(argv: list[str]) -> int:
    """`python -m harness.launch.srun_task STYLE [--log-dir D] -- ARGV`: set, then exec."""
    style, rest = argv[0], argv[1:]
    log_dir = None
    if rest[:1] == ["--log-dir"]:
        log_dir, rest = rest[1], rest[2:]
    if rest[:1] == ["--"]:
        rest = rest[1:]
    for k, v in task_env(style, os.environ).items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
    if log_dir:  # horovodrun gathers output on its own terminal; keep one log per rank like srun does
        fd = os.open(Path(log_dir) / f"rank{os.environ['RANK']}.log", os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
    os.execvp(rest[0], rest)
    return 127


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit("usage: python -m harness.launch.srun_task STYLE [--log-dir DIR] -- ARGV...")
    sys.exit(main(sys.argv[1:]))
