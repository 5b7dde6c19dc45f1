"""The one sweep path (docs/ARCHITECTURE.md, "Data path"): a sweep's cells, planned by the launcher the
registry chooses for this request (local, srun, the node leader, the testbed), run into one run directory.
`ddlbench sweep`, `ddlbench run`, advise and the tests all come through here; nothing else branches on how
cells start.

    run_dir = run_sweep(load_sweep("sweeps/quick.yaml"), RunOptions(output=Path("results/quick")))
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

import yaml

from harness import backends
from harness.contracts.cell import CellSpec
from harness.contracts.launcher import Launcher, LaunchRequest
from harness.core.errors import UserError
from harness.experiment.cells import check_capacity, resolve, warn
from harness.experiment.execute import record_result, run_cells, write_environment
from harness.experiment.options import RunOptions
from harness.experiment.sweep import SweepConfig, expand, load_sweep
from harness.launchers.choose import choose_launcher, this_box
from harness.launchers.identity import from_environ
from harness.rank.worker import run_worker
from harness.results.files import check_output_dir
from harness.results.store import cell_dir


def launcher_for(cfg: SweepConfig | None, options: RunOptions, title: str = "") -> Launcher:
    """The launcher of this run (harness/launchers/choose.py): named by `options.launcher`, else the first
    that the environment and the sweep file claim. On a node that does not lead a multi-node job it raises
    Follows (harness/contracts/launcher.py), a one-line refusal unless the caller serves the leader instead."""
    backends.load()  # a launcher asks the backends' recipes, a node serving the leader's cells too ("Plugins")
    request = LaunchRequest(os.environ, sweep=cfg, flags=options.launcher_flags, title=title)
    return choose_launcher(request, options.launcher)


def sweep_cells(cfg: SweepConfig, launcher: Launcher) -> list[CellSpec]:
    """Every cell of the sweep as this launcher places it: once per network the launcher runs (the testbed's
    profiles, one after the other, so it is reshaped once per profile), spread over its nodes, checked."""
    cells = []
    for net in launcher.networks or (None,):
        if net is None:
            cells += expand(cfg, nodes_for=launcher.nodes_for)
        else:
            cells += expand(
                cfg, network=net.label, rate_mbit=net.rate_mbit, nodes_for=launcher.nodes_for, labels=(net.label,)
            )
    # e.g. dedicated server hosts without a spare host: refused before anything runs
    return [launcher.place(c) for c in cells]


def sweep_text(cfg: SweepConfig, text: str | None) -> str:
    """What the run directory keeps as sweep.yaml: the file as the user wrote it, else the configuration
    written out (a sweep made in code)."""
    return (
        text if text is not None else yaml.safe_dump(json.loads(json.dumps(dataclasses.asdict(cfg))), sort_keys=False)
    )


def run_sweep(
    cfg: SweepConfig, options: RunOptions = RunOptions(), text: str | None = None, launcher: Launcher | None = None
) -> Path:
    """Run every cell of `cfg` into `options.output` (default results/<run-id>); returns the run directory.
    An existing run there is refused unless `resume` or `overwrite`; `cold` here or in the file starts
    ranks cold. `text`: the sweep file as written, kept in the run directory."""
    options = options.with_run_dir(cfg.name)
    run_dir = options.output
    check_output_dir(run_dir)
    launcher = launcher or launcher_for(cfg, options, f"ddlbench sweep {cfg.name} -> {run_dir}")
    cells = sweep_cells(cfg, launcher)
    for note in dict.fromkeys(check_capacity(c, options.oversubscribe or cfg.oversubscribe) for c in cells):
        warn(note)
    options = dataclasses.replace(options, cold=options.cold or cfg.cold)
    run_cells(cells, run_dir, options, launcher, new_run=True, files={"sweep.yaml": sweep_text(cfg, text)})
    return run_dir


def run_sweep_file(path: str | Path, options: RunOptions = RunOptions()) -> Path:
    """`run_sweep` of the sweep file at `path`, kept as written."""
    return run_sweep(load_sweep(path), options, Path(path).read_text())


def on_network(cell: CellSpec, launcher: Launcher) -> CellSpec:
    """One cell resolved on the network its launcher runs its cells on, if it names one (the testbed that is
    up: emulated-<rate>): that network's label, unless the cell names its own, and its rate."""
    if not launcher.networks:
        return resolve(cell)
    if len(launcher.networks) > 1:
        raise UserError(
            f"launcher {launcher.name} runs every cell on {len(launcher.networks)} networks: run the "
            f"cell as a sweep file (`ddlbench sweep`)"
        )
    net = launcher.networks[0]
    label = net.label if cell.network == CellSpec.network else cell.network  # the default: named by nobody
    return resolve(cell.with_(network=label, network_rate_mbit=net.rate_mbit), labels=(net.label,))


def run_cell(
    cell: CellSpec, options: RunOptions = RunOptions(), baseline: bool = False, launcher: Launcher | None = None
) -> Path:
    """One cell (plus the local 1-worker baseline with `baseline`): resolved, checked by its launcher
    (default: the one `options.launcher` names, `ddlbench run --testbed` the testbed's, else this box's),
    run and recorded; returns the run directory."""
    if launcher is None:
        request = LaunchRequest(
            os.environ, flags=options.launcher_flags, title=f"ddlbench run {cell.workload} {cell.scheme}"
        )
        launcher = choose_launcher(request, options.launcher) if options.launcher else this_box(request)
    cell = cell.with_(nodes=launcher.nodes_for(cell.workers))  # the nodes its servers' default counts
    cell = launcher.place(on_network(cell, launcher))  # e.g. dedicated server hosts need a host one box lacks
    warn(check_capacity(cell, options.oversubscribe))
    options = options.with_run_dir(f"{cell.workload}-{cell.scheme}")
    run_dir = options.output
    check_output_dir(run_dir)
    cells = [cell]
    if baseline and cell.scheme != "local":
        cells.insert(
            0,
            resolve(
                cell.with_(
                    scheme="local", workers=1, servers=0, nodes=1, knobs={}, backend="torch", server_hosts="auto"
                )
            ),
        )
    run_cells(cells, run_dir, options, launcher, new_run=True)
    return run_dir


def started_as_rank(environ) -> bool:
    """Whether this `ddlbench run` was started by torchrun or srun as one rank of the cell (`run_as_rank`)."""
    return "TORCHELASTIC_RUN_ID" in environ or environ.get("DDLBENCH_IN_LAUNCHER") == "1"


def run_as_rank(cell: CellSpec, output: Path | None) -> None:
    """Started by torchrun/srun: be one rank; rank 0 records the cell into `output`."""
    if output is None:
        raise UserError("under torchrun/srun every rank must agree on the run directory: pass --output")
    cell = resolve(cell)
    me = from_environ()
    if me.world_size != cell.workers + cell.servers:
        raise UserError(
            f"the launcher started {me.world_size} processes but the cell needs "
            f"{cell.workers} workers + {cell.servers} servers; match --workers to it"
        )
    d = cell_dir(output, cell.cell_id)
    d.mkdir(parents=True, exist_ok=True)
    if me.rank == 0:
        write_environment(output, output.name, cell.device, me.extra)
    result = run_worker(cell, me, d)
    if me.rank == 0 and result is not None:
        record_result(output, output.name, cell, json.loads(json.dumps(result)), 0.0)
