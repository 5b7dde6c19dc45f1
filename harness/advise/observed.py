"""What `ddlbench advise` predicts from: the model's per-layer profile on one device and the network's
all-reduce and push-pull times between the workers' hosts, each measured here unless a stored one is given
(and kept under RUN/advise/, so a resumed advise measures neither again)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from harness.advise.candidates import Layout
from harness.commbench.driver import commbench_cell, measure, network_of
from harness.contracts.launcher import Launcher
from harness.core.atomic import write_parquet_atomic
from harness.core.errors import CellFailed, UserError
from harness.measure.sizes import parse_size, sizes_between
from harness.predict.commbench_fit import read_commbench
from harness.predict.profiler import measure_profile
from harness.results.files import read_table

COMMBENCH_SIZES = ("4K", "32M")
"""Message sizes the network is measured over: the largest gradient buckets and partitions of the grids."""


def profile_table(
    workload: str, batch: int | None, seq_len: int | None, device: str, concurrent: int, stored: Path | None, keep: Path
) -> pd.DataFrame:
    """The stored profile, else the one kept from an earlier try, else measured (5 iterations after 2, with
    `concurrent` - 1 copies computing beside it: workers sharing this machine's cores)."""
    for path in (stored, keep):
        if path is not None and path.is_file():
            return read_table(path, fix=f"make it again with `ddlbench profile {workload} -o {path}`")
    if stored is not None:
        raise UserError(f"profile {stored} does not exist: make it with `ddlbench profile {workload} -o {stored}`")
    df = measure_profile(workload, batch, seq_len, iters=5, warmup=2, device=device, concurrent=concurrent)
    keep.parent.mkdir(parents=True, exist_ok=True)
    write_parquet_atomic(df, keep)
    return df


def commbench_table(
    layout: Layout, device: str, pushpull: bool, stored: list[Path], keep: Path, launcher: Launcher | None = None
) -> pd.DataFrame:
    """Stored commbench runs, else the table kept from an earlier try, else all-reduce (and push-pull with
    one server when a PS candidate exists) measured at the layout's worker count: across the layout's nodes
    through `launcher` (the testbed's on its hosts, srun in an allocation), else here."""
    if stored:
        return read_commbench(stored)
    if keep.is_file():
        return read_table(keep, fix="delete it and run advise again to measure the network anew")
    sizes = sizes_between(parse_size(COMMBENCH_SIZES[0]), parse_size(COMMBENCH_SIZES[1]))
    frames = []
    for collective in ("allreduce", "pushpull") if pushpull else ("allreduce",):
        servers = 1 if collective == "pushpull" else 0
        network, nodes = (network_of(launcher), layout.nodes) if launcher is not None else ("loopback", 1)
        cell = commbench_cell(
            layout.workers,
            collective,
            sizes,
            reps=3,
            warmup=1,
            servers=servers,
            device=device,
            network=network,
            nodes=nodes,
        )
        try:
            frames.append(measure(cell, keep.parent / "commbench" / collective, "advise-commbench", launcher))
        except CellFailed as e:
            raise UserError(
                f"measuring the network ({collective}) failed: {e.reason}; see the logs in "
                f"{keep.parent / 'commbench' / collective}, or give --commbench DIR"
            ) from None
    df = pd.concat(frames, ignore_index=True)
    write_parquet_atomic(df, keep)
    return df
