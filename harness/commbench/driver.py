"""A commbench run (docs/ARCHITECTURE.md, "Commands"): what `ddlbench commbench` is asked (`CommbenchSpec`),
and `run_commbench`, which measures one collective into a run directory's commbench.parquet. Below it, a
commbench cell: build it, launch its ranks (the generic local spawner, or a launcher's `run_module`: the
testbed's launcher on its emulated hosts, srun steps across a Slurm allocation's nodes) and read rank 0's
result, which `ddlbench testbed measure`, `ddlbench advise` and the predictor's loopback probe
(scripts/reference/loopback_probe.py) run too.

    run_dir = run_commbench(CommbenchSpec(workers=2, collective="allreduce", max_size="64M"))
"""

from __future__ import annotations

import contextlib
import json
import math
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from harness.commbench.rows import rows
from harness.commbench.store import store_rows
from harness.contracts.cell import CellSpec, per_worker_node
from harness.contracts.launcher import Launcher
from harness.core.errors import CellFailed, Interrupted, RunFailed, UserError, signals_raise
from harness.experiment.cells import check_capacity, resolve_device, warn
from harness.experiment.dispatch import launcher_for
from harness.experiment.options import RunOptions
from harness.measure.sizes import COLLECTIVES, parse_size, sizes_between
from harness.results.files import check_output_dir
from harness.results.lock import run_lock
from harness.results.paths import default_run_dir
from harness.spawner.cell import launch_cell
from harness.testbed import netns

MODULE = "harness.rank.commbench"
"""The rank module of a commbench cell (harness/rank/commbench.py)."""


@dataclass(frozen=True)
class CommbenchSpec:
    """What `ddlbench commbench` is asked (its options, harness/cli/commands/commbench.py)."""

    workers: int = 2
    """Ranks taking part."""
    collective: str = "allreduce"
    """allreduce | pushpull."""
    min_size: str = "4K"
    """Smallest message (e.g. 4K: bytes with an optional K, M or G)."""
    max_size: str = "256M"
    """Largest message (e.g. 256M)."""
    reps: int = 5
    """Timed repetitions per size."""
    warmup: int = 2
    """Untimed repetitions per size."""
    servers: int = 0
    """Parameter-server processes (push-pull only); 0: one per worker node (harness/contracts/cell.per_worker_node)."""
    timeout_s: float = 900.0
    """Limit of the whole measurement, seconds."""
    device: str = "cpu"
    """cpu | cuda."""
    testbed: bool = False
    """On the emulated testbed that is up: one rank per host first, parameter servers on spare hosts."""
    output: Path | None = None
    """The run directory (None: results/<run-id>); measuring again into it replaces the same collective and
    worker count's rows."""
    oversubscribe: bool = False
    """Allow more ranks than this box has cores."""


def run_commbench(spec: CommbenchSpec) -> Path:
    """Measure one collective into OUTPUT/commbench.parquet: on this box, on the testbed's hosts (holding its
    lease), or inside a Slurm allocation as a job step across its nodes (the workers spread as a sweep's cells
    are). Returns the run directory; RunFailed when the cell failed, Interrupted by SIGTERM/SIGINT."""
    if spec.collective not in ("allreduce", "pushpull"):
        raise UserError(f"unknown collective {spec.collective!r}: use allreduce or pushpull")
    if not (math.isfinite(spec.timeout_s) and spec.timeout_s > 0):
        raise UserError(f"--timeout must be a finite number of seconds > 0, got {spec.timeout_s}; fix --timeout")
    sizes = sizes_between(parse_size(spec.min_size), parse_size(spec.max_size))
    run_dir = spec.output or default_run_dir(f"commbench-{spec.collective}")
    lease = netns.lease(f"ddlbench commbench --testbed --collective {spec.collective}") if spec.testbed else None
    with lease or contextlib.nullcontext():
        launcher = testbed_or_here(spec.testbed)
        cell = commbench_cell(
            spec.workers,
            spec.collective,
            sizes,
            spec.reps,
            spec.warmup,
            spec.servers,
            spec.device,
            network_of(launcher),
            spec.timeout_s,
            nodes=launcher.nodes_for(spec.workers),
        )
        if launcher.warm:  # its ranks start on this box (srun's on the allocation's nodes): this box's cores
            warn(check_capacity(cell, spec.oversubscribe))
        check_output_dir(run_dir)
        _measure_into(run_dir, cell, launcher)
    return run_dir


def testbed_or_here(testbed: bool) -> Launcher:
    """The launcher that runs a commbench: the testbed's when asked (named as `ddlbench run --testbed` names it:
    the testbed that is up, its hosts placed by a cell's rules), else the one this environment claims (srun
    across an allocation's nodes, else this box), chosen through harness/launchers/choose.py."""
    return launcher_for(None, RunOptions(launcher="testbed" if testbed else None))


def network_of(launcher: Launcher) -> str:
    """The network label of a commbench run by `launcher`: the one it runs every cell on (the testbed's
    emulated-<rate>), else loopback."""
    return launcher.networks[0].label if launcher.networks else "loopback"


def _measure_into(run_dir: Path, cell: CellSpec, launcher: Launcher) -> None:
    """Time the cell into RUN/commbench/<collective>.w<workers>.s<servers>/ and store its rows, holding the run
    directory's lock; SIGTERM or SIGINT stop the ranks and raise Interrupted naming the run directory."""
    collective = cell.knobs["collective"]
    d = run_dir / "commbench" / f"{collective}.w{cell.workers}.s{cell.servers}"
    with run_lock(run_dir), signals_raise(run_dir):
        try:
            result = time_cell(cell, d, launcher)
        except CellFailed as e:
            raise RunFailed(f"commbench failed: {e.reason}; see the logs in {d}") from None
        except Interrupted as e:  # the launcher's `finally` has stopped the ranks
            e.stopped = "the commbench ranks were stopped and nothing was recorded"
            raise
        store_rows(run_dir, rows(run_dir.name, cell, result), collective, cell.workers, cell.device)


def commbench_cell(
    workers: int,
    collective: str,
    sizes: list[int],
    reps: int,
    warmup: int,
    servers: int = 0,
    device: str = "cpu",
    network: str = "loopback",
    timeout_s: float = 900.0,
    check: bool = True,
    nodes: int = 1,
) -> CellSpec:
    """The cell spec of one commbench run (scheme `commbench`; its knobs are the timer's settings).
    check: verify one all-reduce's sum before timing; nodes: hosts the workers are spread over."""
    if collective not in COLLECTIVES:
        raise UserError(f"unknown collective {collective!r}: use {', '.join(COLLECTIVES)}")
    if workers < 1 or reps < 1 or warmup < 0:
        raise UserError("--workers and --reps must be >= 1 and --warmup >= 0")
    if collective == "p2p" and workers < 2:
        raise UserError("a point-to-point ping-pong needs 2 workers: give --workers 2")
    servers = per_worker_node(servers, nodes) if collective == "pushpull" else 0
    # the cells' device rule: no more ranks per node than GPUs over NCCL, no CUDA where there is none
    device = resolve_device(device, workers, nodes)
    knobs = {"sizes": list(sizes), "reps": reps, "warmup": warmup, "collective": collective}
    if not check:
        knobs["check"] = False
    return CellSpec(
        workload="-",
        scheme="commbench",
        workers=workers,
        servers=servers,
        device=device,
        timeout_s=timeout_s,
        network=network,
        knobs=knobs,
        nodes=nodes,
    )


def time_cell(cell: CellSpec, cell_dir: Path, launcher: Launcher | None = None) -> dict:
    """Run the cell's ranks (on this box, or through `launcher`'s run_module: the testbed's hosts, an
    allocation's nodes); rank 0's result ({"times": {size: [seconds per repetition]}, "workers"}). Raises
    CellFailed when a rank fails or the cell exceeds its timeout."""
    run = (launcher.run_module if launcher is not None and launcher.run_module else None) or launch_cell
    result = run(cell, cell_dir, None, module=MODULE)
    return json.loads(Path(result).read_text())


def measure(cell: CellSpec, cell_dir: Path, run_id: str, launcher: Launcher | None = None) -> pd.DataFrame:
    """Run the cell and return its tidy commbench rows."""
    return rows(run_id, cell, time_cell(cell, cell_dir, launcher))
