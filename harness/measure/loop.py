"""The one timing loop every method runs (docs/ARCHITECTURE.md, "Timing loop").

Per measured iteration: forward, backward, wait for communication, optimizer step, each phase closed by
a mark of the device's clock (harness/measure/timer.py: perf_counter on CPU, CUDA events from a reused pool
on the compute stream on GPU). Nothing inside the measured window waits for the device: the marks are read
once the device has passed them, or after one synchronisation when the window closes. Waits a scheme
performs inside forward (ByteScheduler waits for the previous iteration's partitions in its pre-hooks) are
measured apart: `forward_wait_s`, and `forward_s` is the forward minus them, so the five phases sum to the
marks' span. An iteration's time runs from its start to the next iteration's start on the device's clock,
so work a scheme defers into the next forward is charged once. Warm-up iterations are not marked and are
discarded; a barrier and one synchronisation (the timer's anchor) precede the first measured iteration.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from harness.measure.timer import IterationTimer, make_clock


def run_loop(
    model,
    scheme,
    loss_fn,
    batch: dict,
    warmup: int,
    iters: int,
    device: torch.device,
    barrier: Callable[[], None],
    fault: Callable[[int], None] | None = None,
) -> list[dict]:
    """Run warmup + iters iterations; return one sample dict per measured iteration."""
    clock = make_clock(device)
    timer = IterationTimer(clock)
    for it in range(warmup + iters):
        measured = it >= warmup
        if it == warmup:
            scheme.quiesce()
            barrier()
            timer.start_window()
        if fault is not None:
            fault(it)
        clock.release(*(m for pair in scheme.take_forward_waits() for m in pair))  # waits outside forward
        if measured:
            timer.begin()
        loss = loss_fn(model, batch)
        if measured:
            timer.phase("forward")
        waits = scheme.take_forward_waits()
        scheme.before_backward()
        scheme.backward(loss)
        scheme.after_backward()
        if measured:
            timer.phase("backward_s")
        scheme.wait()
        if measured:
            timer.phase("comm_wait_s")
        scheme.step()
        if measured:
            timer.phase("optimizer_s")
            timer.end(waits)
        else:
            clock.release(*(m for pair in waits for m in pair))
    scheme.flush()
    samples = []
    for i, row in enumerate(timer.finish()):
        fwd, waited = row.pop("forward"), row.pop("forward_waited_s")
        samples.append({"iteration": i, "forward_s": max(0.0, fwd - waited), "forward_wait_s": min(waited, fwd), **row})
    return samples
