"""`bsp-ps`: after backward, every gradient partition is pushed to its parameter server and the sums
pulled back; no overlap."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from harness.schemes.base import register
from harness.schemes.bucketed import BucketSync
from harness.schemes.knobs import Grid, Knobs, Range
from harness.sim.bucketed import bsp_ps
from harness.sim.model import Model
from harness.sim.ps import SERVER_GBYTE_S


@dataclass(frozen=True)
class PSKnobs(Knobs):
    partition_mb: Annotated[float, Range(gt=0), Grid(1, 4, 16)] = 4.0
    """gradient partition pushed as one key, MB (BytePS-style, 4 MB)"""
    local_reduce: Annotated[int, Range(ge=0, le=1)] = 1
    """1 = the workers of a node sum each partition first and push one copy per node, as BytePS does;
    0 = every worker pushes its whole gradient (flat, for comparison)"""


class BspPS(BucketSync):
    overlap = False
    use_ps = True


register(
    "bsp-ps",
    BspPS,
    "bulk-synchronous on parameter servers: push-pull of all partitions after backward",
    needs=("push_pull",),
    knobs=PSKnobs,
    parameter_server=True,
    model=Model(bsp_ps, {"server_gbyte_s": SERVER_GBYTE_S}),
)
