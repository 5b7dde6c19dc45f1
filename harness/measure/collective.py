"""The rank loop of the one collective timer: time a collective over message sizes on a Transport.

Every repetition starts after a barrier (a late rank's start-up is not communication) and is timed on
every rank; on GPU the clock waits for the device. The caller takes the slowest rank per repetition.
"""

from __future__ import annotations

import statistics
import time

import torch
import torch.distributed as dist

from harness.measure.sizes import PART


def check_allreduce(t, numel: int, rank: int, workers: int, device: torch.device) -> None:
    """One all-reduce of rank + 1 everywhere must give 1 + 2 + ... + workers: proves the ranks really
    exchange data (a misconfigured interface can otherwise time a loopback)."""
    x = torch.full((numel,), float(rank + 1), device=device)
    t.allreduce_async(x, "check").wait()
    expect = workers * (workers + 1) / 2
    if not torch.all(x == expect):
        raise RuntimeError(f"rank {rank}: all-reduce gave {x[0].item()}, expected {expect}")


def timed(fn, device: torch.device) -> float:
    """Seconds of fn() until what it issued has really finished: on CUDA the device is synchronised, since
    an NCCL Work.wait() only makes the current stream wait for the collective and returns at once."""
    t0 = time.perf_counter()
    fn()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter() - t0


def probe_gradient_sync(
    t,
    device: torch.device,
    numel: int,
    ps_keys: list[tuple] | None = None,
    reps: int = 3,
    dtype: torch.dtype = torch.float32,
) -> float:
    """Seconds to synchronise `numel` gradient elements once with nothing to overlap (a scheme's
    `probe_comm`): one all-reduce of a flat buffer, or with `ps_keys` [(key, numel)] a push-pull of every
    key; median of `reps` repetitions after one warm-up, each timed to real completion (`timed`)."""
    if ps_keys is not None:
        scratch = [(torch.zeros(n, device=device, dtype=dtype), key) for key, n in ps_keys]

        def once() -> None:
            for h in [t.push_pull_async(buf, key) for buf, key in scratch]:
                h.wait()
    else:
        flat = torch.zeros(numel, device=device, dtype=dtype)

        def once() -> None:
            t.allreduce_async(flat, "probe").wait()

    return probe_median(once, device, reps)


def probe_median(once, device: torch.device, reps: int = 3) -> float:
    """Median seconds of `once()` timed to real completion (`timed`), over `reps` runs after one warm-up:
    the probe any scheme's `probe_comm` can time its own collectives with."""
    times = [timed(once, device) for _ in range(reps + 1)]
    return statistics.median(times[1:])


def _once(t, collective: str, big: torch.Tensor, size: int, rank: int) -> None:
    buf = big[: size // 4]
    if collective == "allreduce":
        t.allreduce_async(buf, "bench").wait()
    elif collective == "pushpull":
        if size < PART:
            hs = [t.push_pull_async(buf, f"s{size}")]
        else:
            hs = [t.push_pull_async(big[j * PART // 4 : (j + 1) * PART // 4], f"p{j}") for j in range(size // PART)]
        for h in hs:
            h.wait()
    elif rank == 0:  # p2p ping-pong between ranks 0 and 1 (torch.distributed's default group)
        dist.send(buf, 1)
        dist.recv(buf, 1)
    elif rank == 1:
        dist.recv(buf, 0)
        dist.send(buf, 0)


def time_sizes(
    t, collective: str, sizes: list[int], reps: int, warmup: int, rank: int, device: torch.device
) -> dict[int, list[float]]:
    """size -> this rank's seconds per timed repetition (p2p: one way, half the round trip)."""
    big = torch.zeros(max(sizes) // 4, device=device)
    scale = 0.5 if collective == "p2p" else 1.0
    times: dict[int, list[float]] = {}
    for size in sizes:
        samples = []
        for rep in range(warmup + reps):
            t.barrier()
            took = timed(lambda: _once(t, collective, big, size, rank), device)  # noqa: B023 - called at once
            if rep >= warmup:
                samples.append(took * scale)
        times[size] = samples
    return times


def slowest(gathered: list[dict], sizes: list[int], reps: int, collective: str) -> dict[str, list[float]]:
    """Per size (as a string, JSON's key type): the slowest rank's time of each repetition; a ping-pong
    is rank 0's (it times the whole round trip)."""
    if collective == "p2p":
        return {str(s): list(gathered[0][s]) for s in sizes}
    return {str(s): [max(g[s][i] for g in gathered) for i in range(reps)] for s in sizes}
