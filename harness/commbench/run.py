"""A commbench cell: build it, launch its ranks (the generic local spawner, optionally placed on the
emulated testbed's hosts, or a launcher's `run_module`: srun steps across a Slurm allocation's nodes)
and read rank 0's result. What `ddlbench commbench`, `ddlbench testbed measure`, `ddlbench advise` and
the predictor's loopback probe (scripts/reference/loopback_probe.py) all run."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from harness.experiment.cells import resolve_device
from harness.contracts.cell import CellSpec
from harness.commbench.rows import rows
from harness.measure.sizes import COLLECTIVES
from harness.core.errors import UserError
from harness.contracts.launcher import Launcher
from harness.spawner.cell import launch_cell

MODULE = "harness.rank.commbench"
"""The rank module of a commbench cell (harness/rank/commbench.py)."""


def commbench_cell(workers: int, collective: str, sizes: list[int], reps: int, warmup: int, servers: int = 0,
                   device: str = "cpu", network: str = "loopback", timeout_s: float = 900.0,
                   check: bool = True, nodes: int = 1) -> CellSpec:
    """The cell spec of one commbench run (scheme `commbench`; its knobs are the timer's settings).
    check: verify one all-reduce's sum before timing; nodes: hosts the workers are spread over."""
    if collective not in COLLECTIVES:
        raise UserError(f"unknown collective {collective!r}: use {', '.join(COLLECTIVES)}")
    if workers < 1 or reps < 1 or warmup < 0:
        raise UserError("--workers and --reps must be >= 1 and --warmup >= 0")
    if collective == "p2p" and workers < 2:
        raise UserError("a point-to-point ping-pong needs 2 workers: give --workers 2")
    servers = max(1, servers) if collective == "pushpull" else 0
    # the cells' device rule: no more ranks per node than GPUs over NCCL, no CUDA where there is none
    device = resolve_device(device, workers, nodes)
    knobs = {"sizes": list(sizes), "reps": reps, "warmup": warmup, "collective": collective}
    if not check:
        knobs["check"] = False
    return CellSpec(workload="-", scheme="commbench", workers=workers, servers=servers, device=device,
                    timeout_s=timeout_s, network=network, knobs=knobs, nodes=nodes)


def time_cell(cell: CellSpec, cell_dir: Path, placement=None, launcher: Launcher | None = None) -> dict:
    """Run the cell's ranks (on this box, or through `launcher`'s run_module); rank 0's result ({"times":
    {size: [seconds per repetition]}, "workers"}). Raises CellFailed when a rank fails or the cell exceeds
    its timeout."""
    run = (launcher.run_module if launcher is not None and launcher.run_module else None) or launch_cell
    result = run(cell, cell_dir, placement, module=MODULE)
    return json.loads(Path(result).read_text())


def measure(cell: CellSpec, cell_dir: Path, run_id: str, placement=None, launcher: Launcher | None = None) -> pd.DataFrame:
    """Run the cell and return its tidy commbench rows."""
    return rows(run_id, cell, time_cell(cell, cell_dir, placement, launcher))
