"""Handles of the `torch` backend's operations: a list of torch.distributed works (with the count of this
rank's sends, for credit windows), and a push whose start waits for its data to be staged."""

from __future__ import annotations

import time
from concurrent.futures import Future

from harness.contracts.transport import Handle

COMPLETION_POLL_S = 50e-6
"""How often a credit window asks an NCCL operation whether it has finished (is_completed)."""


def wait_done(works) -> None:
    """Block until `works` have really finished. On NCCL, Work.wait() only makes the current stream wait
    for the operation and returns at once, so a scheduler that releases credit after it would let every
    partition go together; is_completed() asks the operation's CUDA event. On gloo wait() blocks already."""
    for w in works:
        while not w.is_completed():
            time.sleep(COMPLETION_POLL_S)
        w.wait()


class WorkHandle(Handle):
    __slots__ = ("after", "poll", "sent", "works")

    def __init__(self, works, after=None, sent: int | None = None, poll: bool = False):
        self.works = works
        self.after = after
        self.sent = sent  # how many leading works are this rank's sends (push-pull); None = all
        # an NCCL collective on CUDA tensors: completion is asked, not waited (wait_done). Never on gloo,
        # CUDA tensors included: its wait() blocks, and its CUDA works never report is_completed()
        self.poll = poll

    def wait_sent(self) -> None:
        if self.sent is None:
            if self.poll:  # credit returns when the all-reduce has really finished
                wait_done(self.works)
                self.works = ()
                return self.wait()
            return self.wait()
        for w in self.works[: self.sent]:
            w.wait()
        # gloo's wait() on a finished send waits for a *further* send on its buffer: never wait twice
        self.works, self.sent = self.works[self.sent :], 0

    def wait(self) -> None:
        for w in self.works:
            w.wait()
        self.works = ()
        if self.after is not None:
            self.after()
            self.after = None


class DeferredHandle(Handle):
    """A push-pull started later, by the stager's sender thread, once its data has reached host memory:
    the future resolves to the real handle."""

    __slots__ = ("future",)

    def __init__(self, future: Future):
        self.future = future

    def wait_sent(self) -> None:
        self.future.result().wait_sent()

    def wait(self) -> None:
        self.future.result().wait()
