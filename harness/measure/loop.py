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

from harness.measure.stoprule import BlockDecision
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
        _iteration(model, scheme, loss_fn, batch, timer, measured, it, fault)
    scheme.flush()
    return _samples(timer.finish())


def run_until_precise(
    model,
    scheme,
    loss_fn,
    batch: dict,
    warmup: int,
    decision: BlockDecision,
    device: torch.device,
    barrier: Callable[[], None],
    fault: Callable[[int], None] | None = None,
) -> tuple[list[dict], str]:
    """The stop rule's loop (harness/measure/stoprule.py): warmup iterations, then measured blocks, each a
    window of its own as `run_loop`'s (opened after the scheme is quiet, closed by reading every mark, on GPU
    one synchronisation), with the block decision between them, outside every window. Returns one sample
    dict per measured iteration and how the loop stopped (stoprule.REASONS)."""
    clock = make_clock(device)
    timer = IterationTimer(clock)
    for it in range(warmup):
        _iteration(model, scheme, loss_fn, batch, timer, False, it, fault)
    scheme.quiesce()
    barrier()
    decision.start()
    rows: list[dict] = []
    it, verdict = warmup, None
    while verdict is None:
        timer.start_window()
        for _ in range(decision.rule.next_block(len(rows))):
            _iteration(model, scheme, loss_fn, batch, timer, True, it, fault)
            it += 1
        block = timer.finish()
        rows += block
        scheme.quiesce()  # a background thread's collectives never interleave with the decision's
        verdict = decision.decide([r["iter_s"] for r in block])
    scheme.flush()
    return _samples(rows), verdict


def _iteration(model, scheme, loss_fn, batch, timer: IterationTimer, measured: bool, it: int, fault) -> None:
    """One iteration: forward, backward, wait, step, each phase marked when `measured`."""
    clock = timer.clock
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


def _samples(rows: list[dict]) -> list[dict]:
    """The timer's rows as samples: numbered, forward without the waits inside it."""
    samples = []
    for i, row in enumerate(rows):
        fwd, waited = row.pop("forward"), row.pop("forward_waited_s")
        samples.append({"iteration": i, "forward_s": max(0.0, fwd - waited), "forward_wait_s": min(waited, fwd), **row})
    return samples
