"""`bsp-a2a`: backward finishes, then all gradients are all-reduced as one fused buffer. No overlap."""

from harness.schemes.base import register
from harness.schemes.bucketed import BucketSync
from harness.sim.bucketed import bsp_a2a
from harness.sim.model import Model


class BspA2A(BucketSync):
    overlap = False


register(
    "bsp-a2a",
    BspA2A,
    "bulk-synchronous: one fused all-reduce after backward, no overlap",
    needs=("allreduce",),
    model=Model(bsp_a2a),
)
