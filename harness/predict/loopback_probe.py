"""A tiny communication probe for this box: W gloo processes time all-reduce and point-to-point
ping-pong over message sizes, and return a commbench-shaped table (collective, workers, size_bytes,
rep, time_s, ...) that harness.predict.network.fit_commbench reads. For when `ddlbench commbench`
is not at hand; the predictor treats both the same.

    python -m harness.predict.loopback_probe -o loopback-comm.parquet
"""

from __future__ import annotations

import argparse
import datetime
import os
import socket
import time

import pandas as pd
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from harness.schema import COMMBENCH_COLUMNS, SCHEMA_VERSION
from harness.planning import ALPHA_BETA_PROBE_SIZES, fit_alpha_beta

SIZES = ALPHA_BETA_PROBE_SIZES  # what mgwfbp's start-up probe uses


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _worker(rank: int, workers: int, port: int, reps: int, sizes: list[int], out: dict) -> None:
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=workers,
                            timeout=datetime.timedelta(seconds=120))
    rows = []
    for size in sizes:
        buf = torch.zeros(size // 4)
        for rep in range(reps + 1):
            dist.barrier()
            t0 = time.perf_counter()
            dist.all_reduce(buf)
            t = time.perf_counter() - t0
            if rep:  # the first is a warm-up
                rows.append(("allreduce", size, rep - 1, t))
        for rep in range(reps + 1):  # ping-pong between ranks 0 and 1: one way = half the round trip
            dist.barrier()
            t0 = time.perf_counter()
            if rank == 0:
                dist.send(buf, 1)
                dist.recv(buf, 1)
            elif rank == 1:
                dist.recv(buf, 0)
                dist.send(buf, 0)
            t = (time.perf_counter() - t0) / 2
            if rep:
                rows.append(("p2p", size, rep - 1, t))
    gathered = [None] * workers
    dist.all_gather_object(gathered, rows)
    if rank == 0:
        out["rows"] = gathered
    dist.destroy_process_group()


def _entry(rank, workers, port, reps, sizes, path):
    out: dict = {}
    _worker(rank, workers, port, reps, sizes, out)
    if rank == 0:
        pd.to_pickle(out["rows"], path)


def probe(workers: int = 2, reps: int = 5, sizes: list[int] | None = None, network: str = "loopback",
          tmp: str = "/tmp") -> pd.DataFrame:
    """Run the probe with `workers` processes on this box; per (collective, size, rep) the slowest
    rank's time (all-reduce) or rank 0's (ping-pong)."""
    sizes = sizes or SIZES
    path = os.path.join(tmp, f"ddlbench-probe-{os.getpid()}.pkl")
    mp.start_processes(_entry, args=(workers, _free_port(), reps, sizes, path), nprocs=workers,
                       start_method="spawn")
    per_rank = pd.read_pickle(path)
    os.remove(path)
    rows = []
    for rank, rs in enumerate(per_rank):
        for coll, size, rep, t in rs:
            if coll == "p2p" and rank != 0:
                continue
            rows.append({"collective": coll, "size_bytes": size, "rep": rep, "time_s": t, "rank": rank})
    df = pd.DataFrame(rows).groupby(["collective", "size_bytes", "rep"], as_index=False)["time_s"].max()
    df["schema_version"] = SCHEMA_VERSION
    df["run_id"] = "loopback-probe"
    df["backend"] = "torch"
    df["workers"] = workers
    df["network"] = network
    gbit = df["size_bytes"] * 8 / df["time_s"] / 1e9
    df["algbw_gbit_s"] = gbit
    df["busbw_gbit_s"] = gbit.where(df["collective"] != "allreduce", gbit * 2 * (workers - 1) / workers)
    for coll, g in df.groupby("collective"):  # the same least-squares line commbench stores
        med = g.groupby("size_bytes")["time_s"].median()
        a, b = fit_alpha_beta([float(x) for x in med.index], [float(t) for t in med.values])
        df.loc[g.index, "fit_alpha_s"], df.loc[g.index, "fit_beta_s_per_byte"] = a, b
    return df.reindex(columns=COMMBENCH_COLUMNS)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m harness.predict.loopback_probe")
    ap.add_argument("-o", "--output", required=True)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--reps", type=int, default=5)
    a = ap.parse_args(argv)
    df = probe(a.workers, a.reps)
    from harness.atomic import write_parquet_atomic
    from pathlib import Path

    write_parquet_atomic(df, Path(a.output))
    print(df.groupby(["collective", "size_bytes"])["time_s"].median().to_string())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
