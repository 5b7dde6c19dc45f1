"""`bytescheduler-ps`: ByteScheduler's priority and credit scheduling on parameter servers."""

from dataclasses import dataclass
from typing import Annotated

from harness.schemes.base import register
from harness.schemes.bytescheduler import ByteSchedulerEngine
from harness.schemes.bytescheduler_a2a import ByteSchedulerKnobs
from harness.schemes.knobs import Range
from harness.sim.bytescheduler import bytescheduler_ps, bytescheduler_ps_runs
from harness.sim.model import Model
from harness.sim.ps import SERVER_GBYTE_S


@dataclass(frozen=True)
class ByteSchedulerPSKnobs(ByteSchedulerKnobs):
    local_reduce: Annotated[int, Range(ge=0, le=1)] = 1
    """1 = the workers of a node sum each partition first and push one copy per node, as BytePS does;
    0 = every worker pushes its whole gradient (flat, for comparison)"""


class ByteSchedulerPS(ByteSchedulerEngine):
    use_ps = True


register(
    "bytescheduler-ps",
    ByteSchedulerPS,
    "ByteScheduler on parameter servers: priority push-pull under a credit window",
    needs=("push_pull",),
    knobs=ByteSchedulerPSKnobs,
    parameter_server=True,
    model=Model(bytescheduler_ps, {"server_gbyte_s": SERVER_GBYTE_S}, runs=bytescheduler_ps_runs),
)
