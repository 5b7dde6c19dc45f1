"""`local`: one worker, no communication. The sweep's measured X_1 and compute-only iteration."""

from harness.schemes.base import Scheme, register
from harness.sim.bucketed import local as local_model
from harness.sim.model import Model


class Local(Scheme):
    pass


register(
    "local",
    Local,
    "1 worker, no communication: the compute-only baseline every sweep measures",
    needs=(),
    communicates=False,
    model=Model(local_model),
)
