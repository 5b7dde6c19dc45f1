"""Getting a GPU gradient partition into host memory for the parameter server without stalling autograd
(docs/ARCHITECTURE.md, "Backend"). A push starts in a gradient hook; a synchronous device-to-host copy
there would wait for the compute stream to drain. The CUDA stager copies on a side stream, after the
compute stream's work up to now, into pinned memory, and returns an event the sender waits for; the CPU
stager hands the tensor itself. `DDLBENCH_PS_DEFER=1` makes the CPU stager defer too (tests exercise
the GPU's path of the client on a CPU this way).
"""

from __future__ import annotations

import os

import torch

DEFER_VAR = "DDLBENCH_PS_DEFER"


class Staged:
    """A partition ready to travel: its host buffer, what to wait for before sending it (None: nothing),
    and what copies the result back into the tensor after the pull (None: it lands in place)."""

    def __init__(self, buf: torch.Tensor, ready=None, after=None, deferred: bool = False):
        self.buf, self.ready, self.after, self.deferred = buf, ready, after, deferred

    def wait_ready(self) -> None:
        if self.ready is not None:
            self.ready.synchronize()


class Stager:
    """One per worker: pinned host buffers per key, one side stream for the copies."""

    def __init__(self, device: torch.device):
        self.cuda = device.type == "cuda"
        self.defer = self.cuda or os.environ.get(DEFER_VAR) == "1"
        self.stream = torch.cuda.Stream(device) if self.cuda else None
        self.bufs: dict[int, torch.Tensor] = {}

    def stage(self, key: int, tensor: torch.Tensor) -> Staged:
        if not self.cuda:
            return Staged(tensor.view(-1), deferred=self.defer)
        buf = self.bufs.get(key)
        if buf is None:
            buf = self.bufs[key] = torch.empty(tensor.numel(), dtype=tensor.dtype, pin_memory=True)
        self.stream.wait_stream(torch.cuda.current_stream(tensor.device))
        with torch.cuda.stream(self.stream):
            buf.copy_(tensor.reshape(-1), non_blocking=True)
            done = torch.cuda.Event()
            done.record(self.stream)
        tensor.record_stream(self.stream)  # the gradient's memory is in use until the copy is done

        def back() -> None:
            tensor.reshape(-1).copy_(buf, non_blocking=False)

        return Staged(buf, done, back, deferred=True)
