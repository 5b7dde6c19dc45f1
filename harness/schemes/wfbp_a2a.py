"""`wfbp-a2a` (wait-free backprop): each tensor's all-reduce starts as soon as its gradient is ready,
overlapping communication with the rest of backward; the optimizer waits for all of them."""

from harness.schemes.base import register
from harness.schemes.bucketed import BucketSync
from harness.sim.bucketed import wfbp_a2a
from harness.sim.model import Model


class WfbpA2A(BucketSync):
    overlap = True
    profile_iters = 1  # learn rank 0's ready order once, so every rank issues in the same order


register(
    "wfbp-a2a",
    WfbpA2A,
    "wait-free backprop: one all-reduce per tensor, started from gradient hooks",
    needs=("allreduce",),
    model=Model(wfbp_a2a),
)
