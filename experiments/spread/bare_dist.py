"""A bare data-parallel loop over gloo, written by hand: what a 2-worker CPU cell's spread is held to.

The same model code, per-worker batch, synthetic inputs, optimizer recipe and thread count as the harness's CPU
cell, and nothing else: no hooks of ours, no phase marks, no result tables, no driver watching the ranks. Two
methods, as the harness's `bsp-a2a` and `ddp` do their work:

  bsp  backward, then every gradient all-reduced as one flattened buffer, averaged, copied back, then the step;
  ddp  torch's DistributedDataParallel (its buckets and hooks), then the step.

Each iteration is timed with perf_counter on every rank; the slowest rank's time per iteration is what the
harness reports too (harness/gate/compare.py, iteration_throughputs).

    python -m torch.distributed.run --standalone --nproc-per-node 2 -m experiments.spread.bare_dist \
        --workload resnet50-tiny --method bsp --warmup 3 --iters 12 --out times.json

Rank 0 writes {"workload", "method", "workers", "global_batch", "iter_s": [slowest rank's seconds per iteration]}.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import torch
import torch.distributed as dist

from harness.contracts.training import make_optimizer
from harness.measure import host_heap
from workloads import WORKLOADS

METHODS = ("bsp", "ddp")


def _bsp_sync(params: list[torch.Tensor], world: int) -> None:
    grads = [p.grad for p in params if p.grad is not None]
    flat = torch.cat([g.reshape(-1) for g in grads])
    dist.all_reduce(flat)
    flat.div_(world)
    at = 0
    for g in grads:
        n = g.numel()
        g.copy_(flat[at : at + n].view_as(g))
        at += n


def run(workload: str, method: str, warmup: int, iters: int, threads: int = 1, seed: int = 0) -> dict | None:
    """One bare run on this rank (the process group from torch.distributed.run's environment)."""
    torch.set_num_threads(threads)
    host_heap.keep()  # as a CPU rank runs (harness/rank/worker.py): the loops compared, not two allocators
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    spec = WORKLOADS.get(workload)
    torch.manual_seed(seed)
    model = spec.build()
    model.train()
    net = torch.nn.parallel.DistributedDataParallel(model) if method == "ddp" else model
    params = [p for p in model.parameters() if p.requires_grad]
    opt = make_optimizer(params)
    batch = spec.make_batch(spec.batch, seq_len=spec.seq_len, device="cpu", seed=seed + 1000 + rank)
    times = []
    for i in range(warmup + iters):
        if i == warmup:
            dist.barrier()
        t0 = time.perf_counter()
        spec.loss(net, batch).backward()
        if method == "bsp":
            _bsp_sync(params, world)
        opt.step()
        opt.zero_grad(set_to_none=False)
        times.append(time.perf_counter() - t0)
    t = torch.tensor(times[warmup:], dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)  # the slowest rank of each iteration
    if rank != 0:
        return None
    return {
        "workload": workload,
        "method": method,
        "workers": world,
        "global_batch": spec.batch * world,
        "iter_s": t.tolist(),
    }


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workload", required=True)
    ap.add_argument("--method", choices=METHODS, required=True)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--iters", type=int, default=12)
    ap.add_argument("--threads", type=int, default=int(os.environ.get("OMP_NUM_THREADS", "1") or 1))
    ap.add_argument("--out", type=Path, required=True)
    a = ap.parse_args(argv)
    result = run(a.workload, a.method, a.warmup, a.iters, a.threads)
    if result is not None:  # written before the group is torn down: gloo's teardown at exit can abort
        a.out.write_text(json.dumps(result))
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
