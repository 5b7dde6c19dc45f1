"""`bsp-ps`: after backward, every gradient partition is pushed to its parameter server and the sums
pulled back; no overlap."""

from harness.schemes.base import Knob, register
from harness.schemes.bucketed import BucketSync

PS_KNOBS = {"partition_mb": Knob(4.0, "gradient partition pushed as one key, MB (BytePS-style, 4 MB)")}


class BspPS(BucketSync):
    overlap = False
    use_ps = True


register("bsp-ps", BspPS, "bulk-synchronous on parameter servers: push-pull of all partitions after backward",
         knobs=PS_KNOBS, parameter_server=True)
