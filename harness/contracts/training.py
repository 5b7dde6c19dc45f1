"""What every training process of the harness shares: the one optimizer recipe, the compute dtype
(docs/ARCHITECTURE.md, "Precision") and how a finished process leaves. Imported by the worker, the
commbench ranks, the testbed probe, the profiler and the lossless tests, so that none of them imports
harness.rank.worker (an entry point) for a helper."""

from __future__ import annotations

import faulthandler
import os
import sys
import threading
from collections.abc import Callable

import torch

LR = 1e-3  # SGD learning rate: small enough that random-init models stay finite for 100s of steps
MOMENTUM = 0.9


def make_optimizer(params):
    """The one optimizer every method uses (the study used different ones per method; we do not)."""
    return torch.optim.SGD(params, lr=LR, momentum=MOMENTUM)


DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}
"""Compute dtypes a cell may ask for. fp16 is absent: it needs loss scaling, which changes the update
every method would have to reproduce, and bf16 is what mixed-precision training runs on current hardware."""


def set_precision(dtype: str) -> dict:
    """fp32 means fp32: torch lets cuDNN convolutions use TF32 on Ampere and newer by default while matmuls
    stay fp32, so a ResNet labelled fp32 would run TF32. Both are set from the compute dtype, by every
    process that computes a cell's work (the worker, the profiler, the doctor's probe); returns the flags,
    recorded with the result."""
    full = dtype == "fp32"
    torch.backends.cuda.matmul.allow_tf32 = not full
    torch.backends.cudnn.allow_tf32 = not full
    return {
        "matmul_allow_tf32": torch.backends.cuda.matmul.allow_tf32,
        "cudnn_allow_tf32": torch.backends.cudnn.allow_tf32,
    }


def autocast_loss(loss_fn: Callable, dtype: str, device: torch.device) -> Callable:
    """`loss_fn(model, batch)` with forward and loss under torch.autocast for a bf16 cell (the master
    parameters, hence .grad and the optimizer, stay fp32; backward runs outside, as PyTorch's AMP recipe
    has it); fp32 returns `loss_fn` itself, so an fp32 cell runs exactly the code it always ran."""
    if dtype == "fp32":
        return loss_fn
    low = DTYPES[dtype]

    def loss(model, batch):
        with torch.autocast(device_type=device.type, dtype=low):
            return loss_fn(model, batch)

    return loss


def crash_stacks() -> None:
    """A crash in native code (a segmentation fault in a C++ extension, NCCL, gloo) prints every thread's
    Python stack to stderr, which is the rank's log: call once the output is where it stays (a warm rank's
    is redirected before its main runs). Without it such a rank dies with an empty log."""
    faulthandler.enable(file=sys.stderr, all_threads=True)


def bounded(fn: Callable[[], None], seconds: float, what: str) -> bool:
    """Run fn() but give up after `seconds`: True if it returned, False (and a line on stderr) if it
    hung. For teardown after every result is on disk (NCCL's destroy_process_group can hang when a peer
    has already left): the process then leaves through exit_now instead of waiting for the cell's timeout."""
    done = threading.Event()
    failure: list[BaseException] = []

    def run() -> None:
        try:
            fn()
        except BaseException as e:  # reported below, on the caller's thread
            failure.append(e)
        finally:
            done.set()

    threading.Thread(target=run, name=f"bounded:{what}", daemon=True).start()
    if not done.wait(seconds):
        print(
            f"warning: {what} did not finish within {seconds:.0f} s after the results were written; leaving without it",
            file=sys.stderr,
            flush=True,
        )
        return False
    if failure:
        raise failure[0]
    return True


def exit_now(code: int) -> None:
    """Leave without interpreter teardown once every result is on disk and the process group is gone:
    torch's C++ destructors can abort there ("terminate called without an active exception", a store or
    gloo thread still joinable when the peer rank has already exited; seen intermittently on rank 1),
    which would fail a cell whose results are complete."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
