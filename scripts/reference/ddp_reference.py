"""A minimal hand-written DDP training loop, to measure the harness's own overhead against.

    torchrun --nproc-per-node 2 scripts/reference/ddp_reference.py bert-base-tiny 10 30 [BATCH]

Same model, per-worker batch, optimizer and threads as `ddlbench run --scheme ddp`; nothing else:
no hooks of ours, no phase clocks, no result files. Prints the throughput (global batch over the
median of the slowest rank's iteration times), for comparison with ddlbench's `throughput_median`.
"""

import statistics
import sys
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from harness.contracts.training import make_optimizer
from workloads import WORKLOADS


def main() -> None:
    name, warmup, iters = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    per_worker = int(sys.argv[4]) if len(sys.argv) > 4 else None  # default: the workload's
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    spec = WORKLOADS.get(name)
    torch.manual_seed(0)
    model = DistributedDataParallel(spec.build())
    opt = make_optimizer(list(model.parameters()))
    per_worker = per_worker or spec.batch
    batch = spec.make_batch(per_worker, seq_len=spec.seq_len, device="cpu", seed=1000 + rank)
    times = []
    for i in range(warmup + iters):
        if i == warmup:
            dist.barrier()
        t0 = time.perf_counter()
        spec.loss(model, batch).backward()
        opt.step()
        opt.zero_grad()
        times.append(time.perf_counter() - t0)
    t = torch.tensor(times[warmup:])
    dist.all_reduce(t, op=dist.ReduceOp.MAX)  # the slowest rank of each iteration
    if rank == 0:
        print(f"{name}: {per_worker * world / statistics.median(t.tolist()):.2f} samples/s")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
