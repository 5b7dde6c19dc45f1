"""What every training process of the harness shares: the one optimizer recipe and how a finished
process leaves. Imported by the worker, the commbench ranks, the testbed probe, the profiler and the
lossless tests, so that none of them imports harness.worker (an entry point) for a helper."""

from __future__ import annotations

import os
import sys

import torch

LR = 1e-3          # SGD learning rate: small enough that random-init models stay finite for 100s of steps
MOMENTUM = 0.9


def make_optimizer(params):
    """The one optimizer every method uses (the study used different ones per method; we do not)."""
    return torch.optim.SGD(params, lr=LR, momentum=MOMENTUM)


def exit_now(code: int) -> None:
    """Leave without interpreter teardown once every result is on disk and the process group is gone:
    torch's C++ destructors can abort there ("terminate called without an active exception", a store or
    gloo thread still joinable when the peer rank has already exited; seen intermittently on rank 1),
    which would fail a cell whose results are complete."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
