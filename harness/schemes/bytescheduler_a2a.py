"""`bytescheduler-a2a`: ByteScheduler's priority and credit scheduling on all-reduce."""

from harness.schemes.base import Knob, register
from harness.schemes.bytescheduler import ByteSchedulerEngine

BS_KNOBS = {
    "partition_mb": Knob(4.0, "partition size, MB (ByteScheduler's default 4 MB)"),
    "credit_mb": Knob(16.0, "credit window: bytes in flight at most, MB (default 16 MB)"),
}


class ByteSchedulerA2A(ByteSchedulerEngine):
    use_ps = False


register("bytescheduler-a2a", ByteSchedulerA2A,
         "ByteScheduler on all-reduce: priority partitions under a credit window, overlapping next forward",
         backends=("torch", "horovod"), knobs=BS_KNOBS)
