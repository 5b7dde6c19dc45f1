"""A rank's process environment (docs/ARCHITECTURE.md, "Launching"): what every launcher gives a rank's
process beside the cell, and the variables of ours a framework's launch program must not inherit.

    env = base_env(cell.threads, "local", extra)   # this process's variables, less ours, plus the rank's
"""

from __future__ import annotations

import os
import time

from harness.procs.argv import PACKAGE_ROOT

OUR_RANK_VARS = (
    "RANK",
    "WORLD_SIZE",
    "LOCAL_RANK",
    "LOCAL_WORLD_SIZE",
    "NODE_RANK",
    "GROUP_RANK",
    "MASTER_ADDR",
    "MASTER_PORT",
    "TORCHELASTIC_RUN_ID",
)
"""Our own launcher's rank variables: a framework's launch program sets its own, ours must not leak into the ranks."""
SECRET_VAR = "DDLBENCH_JOB_SECRET"
"""A multi-node job's secret (harness/launchers/nodes/secret.py): the driver's alone, never a rank's."""
PLACED_AT_VAR = "DDLBENCH_PLACED_AT"
"""time.time() when the launcher began placing the cell's ranks (docs/ARCHITECTURE.md, "Warm ranks"):
every launcher sets it, the worker records `startup_s` from it."""
RANK_START_VAR = "DDLBENCH_RANK_START"
"""How the rank was started, `warm` (forked from the zygote) or `cold`; unset = cold (warm/spawn.py)."""


def placed_now() -> dict[str, str]:
    """The variable that dates a cell's placement (PLACED_AT_VAR), for every rank of a cell placed now."""
    return {PLACED_AT_VAR: repr(time.time())}


def base_env(threads: int, launcher: str, extra: dict | None = None) -> dict:
    """This process's environment without our own rank variables and the job secret, plus thread counts and
    the launcher's name (recorded as the rank's source)."""
    env = {k: v for k, v in os.environ.items() if k not in OUR_RANK_VARS and k != SECRET_VAR}
    env.update(
        OMP_NUM_THREADS=str(threads),
        MKL_NUM_THREADS=str(threads),
        PYTHONUNBUFFERED="1",
        PYTHONSAFEPATH="1",
        DDLBENCH_LAUNCHER=launcher,
    )
    env.update(extra or {})
    env["PYTHONPATH"] = os.pathsep.join([PACKAGE_ROOT, *filter(None, [env.get("PYTHONPATH")])])
    env.update(placed_now())
    return env
