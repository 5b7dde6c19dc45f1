"""A bare training loop, written by hand: the reference the harness's one-GPU throughput is held to.

A bare training loop, written by hand, to hold the harness's one-GPU throughput against (README, "GPUs"):
the same model code, batch, synthetic inputs, optimizer recipe and precision as a `local` cell, and nothing
else: no hooks, no per-iteration clock, no process group. Throughput = batch x iterations / the wall time of
the iterations, synchronised once before and once after.

    python -m harness.doctor.timing.bare_loop --workload resnet50 --batch 64 --dtype fp32 --device cuda
    python -m harness.doctor.timing.bare_loop --workload bert-base --dtype bf16 --json     # one JSON line
    python -m harness.doctor.timing.bare_loop --workload bert-base-tiny --device cpu --threads 1 --json  # a CPU rank

`Bare` keeps one model built so that one process can time it again and again, and time variants of it
(one CPU thread, a synchronisation per iteration) interleaved with other loops (harness/doctor/timing/gpu_timing.py).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch

from harness.contracts.training import DTYPES, LR, MOMENTUM, set_precision
from harness.measure import host_heap
from workloads import WORKLOADS


class Bare:
    """One workload built on a device: `step()` is one training iteration as a user writes it."""

    def __init__(
        self, workload: str, batch: int | None = None, seq_len: int | None = None, device: str = "cuda", seed: int = 0
    ):
        self.spec = WORKLOADS.get(workload)
        self.workload = workload
        self.batch = batch or self.spec.batch
        self.seq_len = seq_len if seq_len is not None else self.spec.seq_len
        self.device = torch.device(device)
        # as a CPU rank runs (harness/rank/worker.py): the loops compared, not two allocators
        self.heap = host_heap.keep() if self.device.type == "cpu" else host_heap.DEFAULT
        torch.manual_seed(seed)
        self.model = self.spec.build().to(self.device)
        self.model.train()
        self.opt = torch.optim.SGD(self.model.parameters(), lr=LR, momentum=MOMENTUM)
        self.data = self.spec.make_batch(self.batch, seq_len=self.seq_len, device=self.device, seed=seed + 1000)
        self.dtype = "fp32"

    def use(self, dtype: str) -> Bare:
        set_precision(dtype)  # fp32 = no TF32, as the harness's cells run
        self.dtype = dtype
        return self

    def loss(self, model, batch):
        if self.dtype == "fp32":
            return self.spec.loss(model, batch)
        with torch.autocast(device_type=self.device.type, dtype=DTYPES[self.dtype]):
            return self.spec.loss(model, batch)

    def step(self) -> None:
        self.loss(self.model, self.data).backward()
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)

    def sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def time(self, warmup: int, iters: int, threads: int | None = None, sync_each: bool = False) -> dict:
        """Seconds per iteration of `iters` timed iterations after `warmup`; `threads`: torch's intra-op
        threads during the run (restored after); `sync_each`: a device synchronisation after every step.
        On a CPU each iteration is timed too (`iter_s_median`); on a GPU that would need a synchronisation."""
        before = torch.get_num_threads()
        if threads:
            torch.set_num_threads(threads)
        each = []
        try:
            for _ in range(warmup):
                self.step()
            self.sync()
            t0 = prev = time.perf_counter()
            for _ in range(iters):
                self.step()
                if sync_each:
                    self.sync()
                if self.device.type == "cpu":
                    now = time.perf_counter()
                    each.append(now - prev)
                    prev = now
            self.sync()
            seconds = time.perf_counter() - t0
        finally:
            torch.set_num_threads(before)
        return {
            "workload": self.workload,
            "batch": self.batch,
            "seq_len": self.seq_len,
            "dtype": self.dtype,
            "device": str(self.device),
            "iters": iters,
            "iter_s": seconds / iters,
            "iter_s_median": statistics.median(each) if each else None,
            "throughput": self.batch * iters / seconds,
            "sample_unit": self.spec.sample_unit,
            "host_heap": self.heap,
        }


def bare_throughput(
    workload: str,
    batch: int | None = None,
    seq_len: int | None = None,
    dtype: str = "fp32",
    warmup: int = 10,
    iters: int = 30,
    device: str = "cuda",
    seed: int = 0,
    threads: int | None = None,
) -> dict:
    return Bare(workload, batch, seq_len, device, seed).use(dtype).time(warmup, iters, threads=threads)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--workload", required=True)
    ap.add_argument("--batch", type=int)
    ap.add_argument("--seq-len", type=int)
    ap.add_argument("--dtype", default="fp32", choices=sorted(DTYPES))
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--iters", type=int, default=30)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--threads", type=int, help="torch intra-op threads (a CPU rank runs with 1)")
    ap.add_argument("--json", action="store_true", help="print one JSON line")
    a = ap.parse_args(argv)
    r = bare_throughput(a.workload, a.batch, a.seq_len, a.dtype, a.warmup, a.iters, a.device, threads=a.threads)
    if a.json:
        print(json.dumps(r))
    else:
        print(
            f"{r['workload']} batch {r['batch']} {r['dtype']} on {r['device']}: {r['throughput']:.1f} "
            f"{r['sample_unit']}/s ({r['iter_s'] * 1e3:.2f} ms per iteration, {r['iters']} iterations)"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
