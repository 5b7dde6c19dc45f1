"""The rank entry point of a commbench cell: `python -m harness.rank.commbench --cell C.json --out DIR`.

Ranks below `cell.workers` time the collective (harness.measure.collective) on the cell's backend; the
others serve as parameter servers. Rank 0 writes result.json: per size, the slowest rank's times.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch

from harness import backends
from harness.contracts.cell import CellSpec
from harness.contracts.devices import check_group_backend, rank_device
from harness.contracts.training import crash_stacks, exit_now
from harness.core.atomic import write_json_atomic
from harness.launchers.identity import from_environ
from harness.measure import host_heap
from harness.measure.collective import check_allreduce, slowest, time_sizes
from harness.measure.sizes import push_pull_keys


def run_rank(cell: CellSpec, out: Path) -> None:
    registered = backends.load()  # first: who this rank is may be its framework launcher's word
    me = from_environ()
    kn = cell.knobs
    sizes, reps, warm, collective = kn["sizes"], kn["reps"], kn["warmup"], kn["collective"]
    backend = registered.get(cell.backend)
    if me.rank >= cell.workers:
        backend.serve(cell, me)
        return
    device = rank_device(
        me.local_rank, cell.device, cell.dist_backend
    )  # the worker's rule (harness/contracts/devices.py)
    t = backend.start(cell, me, device)
    check_group_backend(device.type, cell.dist_backend, t.facts.get("dist_backend", ""))
    if collective == "pushpull":
        t.declare_keys(push_pull_keys(sizes))
    if collective == "allreduce" and kn.get("check", True):
        check_allreduce(t, min(sizes) // 4, me.rank, cell.workers, device)
    times = time_sizes(t, collective, sizes, reps, warm, me.rank, device)
    gathered = t.gather_object(times)
    t.shutdown()
    if me.rank == 0:
        write_json_atomic(
            out / "result.json",
            {
                "times": slowest(gathered, sizes, reps, collective),
                "workers": cell.workers,
                "dist_backend": t.facts.get("dist_backend", ""),
            },
        )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m harness.rank.commbench")
    ap.add_argument("--cell", required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args(argv)
    crash_stacks()
    cell = CellSpec.from_json(Path(a.cell).read_text())
    if cell.device == "cpu":
        torch.set_num_threads(cell.threads)
        host_heap.keep()  # as the cells whose communication it times (harness/measure/host_heap.py)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    run_rank(cell, out)
    return 0


if __name__ == "__main__":
    exit_now(main())
