"""`wfbp-ps`: each gradient's partitions are pushed to the servers as soon as the gradient is ready;
the optimizer waits for all pulls."""

from harness.schemes.base import register
from harness.schemes.bsp_ps import PSKnobs
from harness.schemes.bucketed import BucketSync
from harness.sim.bucketed import wfbp_ps, wfbp_ps_runs
from harness.sim.model import Model
from harness.sim.ps import SERVER_GBYTE_S


class WfbpPS(BucketSync):
    overlap = True
    use_ps = True
    profile_iters = 0  # pushes go out in whatever order gradients become ready


register(
    "wfbp-ps",
    WfbpPS,
    "wait-free backprop on parameter servers: push-pull per partition from hooks",
    needs=("push_pull",),
    knobs=PSKnobs,
    parameter_server=True,
    model=Model(wfbp_ps, {"server_gbyte_s": SERVER_GBYTE_S}, runs=wfbp_ps_runs),
)
