"""`wfbp-ps`: each gradient's partitions are pushed to the servers as soon as the gradient is ready;
the optimizer waits for all pulls."""

from harness.schemes.base import register
from harness.schemes.bsp_ps import PS_KNOBS
from harness.schemes.bucketed import BucketSync


class WfbpPS(BucketSync):
    overlap = True
    use_ps = True
    profile_iters = 0  # pushes go out in whatever order gradients become ready


register("wfbp-ps", WfbpPS, "wait-free backprop on parameter servers: push-pull per partition from hooks",
         knobs=PS_KNOBS, parameter_server=True)
