"""Worker of `measure_allreduce_busbw`: one rank of a gloo all-reduce timing, run inside a testbed host.

    RANK=0 WORLD_SIZE=2 MASTER_ADDR=10.77.0.1 MASTER_PORT=29511 GLOO_SOCKET_IFNAME=ddlb-eth0 \\
        nsenter --net=/run/netns/ddlb-h0 -- python -m harness.testbed._allreduce_probe --size-bytes 33554432

Rank 0 prints one JSON line: the per-repetition times of the slowest rank, in seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from datetime import timedelta


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size-bytes", type=int, required=True)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--timeout-s", type=float, default=60.0)
    a = ap.parse_args()

    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)  # one rank per core; the reduction itself is a negligible part of the time
    dist.init_process_group("gloo", timeout=timedelta(seconds=a.timeout_s))  # env:// from RANK, MASTER_*
    rank, world = dist.get_rank(), dist.get_world_size()
    x = torch.full((a.size_bytes // 4,), float(rank + 1), dtype=torch.float32)

    dist.all_reduce(x)  # also proves the ranks really exchange data
    expect = world * (world + 1) / 2
    if not torch.all(x == expect):
        raise SystemExit(f"rank {rank}: all-reduce gave {x[0].item()}, expected {expect}")
    for _ in range(a.warmup):
        x.fill_(1.0)
        dist.all_reduce(x)

    times = torch.zeros(a.reps, dtype=torch.float64)
    for r in range(a.reps):
        x.fill_(1.0)  # keep values finite; outside the timed region
        dist.barrier()  # start together, so a late rank's start-up is not counted as communication
        t0 = time.perf_counter()
        dist.all_reduce(x)
        times[r] = time.perf_counter() - t0
    dist.all_reduce(times, op=dist.ReduceOp.MAX)  # an all-reduce ends when its slowest rank ends
    if rank == 0:
        print(json.dumps({"times_s": times.tolist(), "world": world, "ifname": os.environ.get("GLOO_SOCKET_IFNAME")}),
              flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    from harness.training import exit_now

    main()
    exit_now(0)
