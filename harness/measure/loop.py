"""The one timing loop every method runs (docs/ARCHITECTURE.md, "Timing loop").

Per iteration: forward, backward, wait for communication, optimizer step, each phase closed by a clock
read (after a device synchronise on GPU). An iteration's time runs from its start to the next
iteration's start, so work a scheme defers into the next forward (ByteScheduler) is charged once.
Warm-up iterations are discarded; a barrier precedes the first measured iteration.
"""

from __future__ import annotations

import time
from typing import Callable

import torch


def make_clock(device: torch.device) -> Callable[[], float]:
    if device.type == "cuda":
        def clock() -> float:
            torch.cuda.synchronize(device)
            return time.perf_counter()
        return clock
    return time.perf_counter


def run_loop(model, scheme, loss_fn, batch: dict, warmup: int, iters: int, device: torch.device,
             barrier: Callable[[], None], fault: Callable[[int], None] | None = None) -> list[dict]:
    """Run warmup + iters iterations; return one sample dict per measured iteration."""
    clock = make_clock(device)
    samples: list[dict] = []
    starts: list[float] = []
    total = warmup + iters
    for it in range(total):
        if it == warmup:
            scheme.quiesce()
            barrier()
        if fault is not None:
            fault(it)
        t0 = clock()
        loss = loss_fn(model, batch)
        t1 = clock()
        scheme.before_backward()
        scheme.backward(loss)
        scheme.after_backward()
        t2 = clock()
        scheme.wait()
        t3 = clock()
        scheme.step()
        t4 = clock()
        if it >= warmup:
            starts.append(t0)
            samples.append({"iteration": it - warmup, "forward_s": t1 - t0, "backward_s": t2 - t1,
                            "comm_wait_s": t3 - t2, "optimizer_s": t4 - t3})
    scheme.flush()
    end = clock()
    for i, s in enumerate(samples):
        nxt = starts[i + 1] if i + 1 < len(starts) else end
        s["iter_s"] = nxt - starts[i]
    return samples

