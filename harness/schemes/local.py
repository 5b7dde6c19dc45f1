"""`local`: one worker, no communication. The sweep's measured X_1 and compute-only iteration."""

from harness.schemes.base import Scheme, register


class Local(Scheme):
    pass


register("local", Local, "1 worker, no communication: the compute-only baseline every sweep measures",
         communicates=False)
