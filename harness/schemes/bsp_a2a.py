"""`bsp-a2a`: backward finishes, then all gradients are all-reduced as one fused buffer. No overlap."""

from harness.schemes.bucketed import BucketSync
from harness.schemes.base import register


class BspA2A(BucketSync):
    overlap = False


register("bsp-a2a", BspA2A, "bulk-synchronous: one fused all-reduce after backward, no overlap",
         backends=("torch", "horovod"))
