"""`bytescheduler-ps`: ByteScheduler's priority and credit scheduling on parameter servers."""

from harness.schemes.base import register
from harness.schemes.bytescheduler import ByteSchedulerEngine
from harness.schemes.bytescheduler_a2a import BS_KNOBS


class ByteSchedulerPS(ByteSchedulerEngine):
    use_ps = True


register("bytescheduler-ps", ByteSchedulerPS,
         "ByteScheduler on parameter servers: priority push-pull under a credit window",
         knobs=BS_KNOBS, parameter_server=True)
