"""A bare training loop, written by hand, to hold the harness's one-GPU throughput against (README, "First run
on GPUs"): the same model code, batch, synthetic inputs, optimizer recipe and precision as a `local` cell, and
nothing else: no hooks, no per-iteration clock, no process group. Throughput = batch x iterations / the wall
time of the iterations, synchronised once before and once after.

    python scripts/bare_loop.py --workload resnet50 --batch 64 --dtype fp32 --device cuda
    python scripts/bare_loop.py --workload bert-base --dtype bf16 --json     # one JSON line

The GPU test module runs it beside `ddlbench run --scheme local` and asks for harness / bare >= 0.99.
"""

from __future__ import annotations

import argparse
import json
import time

import torch

from harness.training import DTYPES, LR, MOMENTUM, set_precision
from workloads import WORKLOADS


def bare_throughput(workload: str, batch: int | None = None, seq_len: int | None = None, dtype: str = "fp32",
                    warmup: int = 10, iters: int = 30, device: str = "cuda", seed: int = 0) -> dict:
    spec = WORKLOADS.get(workload)
    batch = batch or spec.batch
    seq_len = seq_len if seq_len is not None else spec.seq_len
    dev = torch.device(device)
    set_precision(dtype)  # fp32 = no TF32, as the harness's cells run
    torch.manual_seed(seed)
    model = spec.build().to(dev)
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM)
    data = spec.make_batch(batch, seq_len=seq_len, device=dev, seed=seed + 1000)

    def step() -> None:
        if dtype == "fp32":
            loss = spec.loss(model, data)
        else:
            with torch.autocast(device_type=dev.type, dtype=DTYPES[dtype]):
                loss = spec.loss(model, data)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    def sync() -> None:
        if dev.type == "cuda":
            torch.cuda.synchronize(dev)

    for _ in range(warmup):
        step()
    sync()
    t0 = time.perf_counter()
    for _ in range(iters):
        step()
    sync()
    seconds = time.perf_counter() - t0
    return {"workload": workload, "batch": batch, "seq_len": seq_len, "dtype": dtype, "device": str(dev),
            "iters": iters, "iter_s": seconds / iters, "throughput": batch * iters / seconds,
            "sample_unit": spec.sample_unit}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--workload", required=True)
    ap.add_argument("--batch", type=int)
    ap.add_argument("--seq-len", type=int)
    ap.add_argument("--dtype", default="fp32", choices=sorted(DTYPES))
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--iters", type=int, default=30)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--json", action="store_true", help="print one JSON line")
    a = ap.parse_args(argv)
    r = bare_throughput(a.workload, a.batch, a.seq_len, a.dtype, a.warmup, a.iters, a.device)
    if a.json:
        print(json.dumps(r))
    else:
        print(f"{r['workload']} batch {r['batch']} {r['dtype']} on {r['device']}: {r['throughput']:.1f} "
              f"{r['sample_unit']}/s ({r['iter_s'] * 1e3:.2f} ms per iteration, {r['iters']} iterations)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
