"""The one timing loop every method runs (docs/ARCHITECTURE.md, "Timing loop").

Per iteration: forward, backward, wait for communication, optimizer step, each phase closed by a mark of
the device's clock (harness/measure/timer.py: perf_counter on CPU, CUDA events on the compute stream on
GPU) and one synchronisation per iteration, on its last mark. Waits a scheme performs inside forward
(ByteScheduler waits for the previous iteration's partitions in its pre-hooks) are measured apart:
`forward_wait_s`, and `forward_s` is the forward minus them, so the five phases sum to the marks' span.
An iteration's time runs from its start to the next iteration's start (wall clock), so work a scheme
defers into the next forward is charged once. Warm-up iterations are discarded; a barrier precedes the
first measured iteration.
"""

from __future__ import annotations

import time
from typing import Callable

import torch

from harness.measure.timer import PhaseTimer, make_clock


def run_loop(model, scheme, loss_fn, batch: dict, warmup: int, iters: int, device: torch.device,
             barrier: Callable[[], None], fault: Callable[[int], None] | None = None) -> list[dict]:
    """Run warmup + iters iterations; return one sample dict per measured iteration."""
    timer = PhaseTimer(make_clock(device))
    samples: list[dict] = []
    starts: list[float] = []
    total = warmup + iters
    for it in range(total):
        if it == warmup:
            scheme.quiesce()
            barrier()
        if fault is not None:
            fault(it)
        scheme.take_forward_waits()  # waits outside forward (flush, before_backward) are not forward's
        t0 = timer.begin()
        loss = loss_fn(model, batch)
        timer.phase("forward")
        waits = scheme.take_forward_waits()
        scheme.before_backward()
        scheme.backward(loss)
        scheme.after_backward()
        timer.phase("backward_s")
        scheme.wait()
        timer.phase("comm_wait_s")
        scheme.step()
        timer.phase("optimizer_s")
        phases, waited = timer.collect(waits)
        if it >= warmup:
            starts.append(t0)
            fwd = phases.pop("forward")
            samples.append({"iteration": it - warmup, "forward_s": max(0.0, fwd - waited),
                            "forward_wait_s": min(waited, fwd), **phases})
    scheme.flush()
    if device.type == "cuda":
        torch.cuda.synchronize(device)  # once, at the end: everything the run issued has finished
    end = time.perf_counter()
    for i, s in enumerate(samples):
        nxt = starts[i + 1] if i + 1 < len(starts) else end
        s["iter_s"] = nxt - starts[i]
    return samples
