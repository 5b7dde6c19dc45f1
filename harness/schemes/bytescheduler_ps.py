"""`bytescheduler-ps`: ByteScheduler's priority and credit scheduling on parameter servers."""

from harness.predict.bytescheduler_sim import bytescheduler_ps
from harness.predict.model import Model
from harness.predict.ps_sim import SERVER_GBYTE_S
from harness.schemes.base import register
from harness.schemes.bytescheduler import ByteSchedulerEngine
from harness.schemes.bytescheduler_a2a import ByteSchedulerKnobs


class ByteSchedulerPS(ByteSchedulerEngine):
    use_ps = True


register("bytescheduler-ps", ByteSchedulerPS,
         "ByteScheduler on parameter servers: priority push-pull under a credit window",
         knobs=ByteSchedulerKnobs, parameter_server=True,
         model=Model(bytescheduler_ps, {"server_gbyte_s": SERVER_GBYTE_S}))
