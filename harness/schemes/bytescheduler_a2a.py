"""`bytescheduler-a2a`: ByteScheduler's priority and credit scheduling on all-reduce."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from harness.schemes.base import register
from harness.schemes.bytescheduler import ByteSchedulerEngine
from harness.schemes.knobs import Grid, Knobs, Range
from harness.sim.bytescheduler import bytescheduler_a2a
from harness.sim.model import Model


@dataclass(frozen=True)
class ByteSchedulerKnobs(Knobs):
    partition_mb: Annotated[float, Range(gt=0), Grid(1, 4, 16)] = 4.0
    """partition size, MB (ByteScheduler's default 4 MB)"""
    credit_mb: Annotated[float, Range(gt=0), Grid(4, 16, 64)] = 16.0
    """credit window: bytes in flight at most, MB (default 16 MB)"""


class ByteSchedulerA2A(ByteSchedulerEngine):
    use_ps = False


register(
    "bytescheduler-a2a",
    ByteSchedulerA2A,
    "ByteScheduler on all-reduce: priority partitions under a credit window, overlapping next forward",
    needs=("allreduce",),
    knobs=ByteSchedulerKnobs,
    model=Model(bytescheduler_a2a),
)
