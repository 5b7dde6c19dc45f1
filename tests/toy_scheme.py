"""A toy scheme, added the way a user adds one: this file (scheme, knobs, simulation model) plus its test
(tests/integration/processes/test_scheme_contract.py), nothing else touched. Loaded by the ranks through
DDLBENCH_SCHEME_MODULES=toy_scheme (see harness/schemes/__init__.py).

`toy`: after backward, one all-reduce per gradient tensor in parameter order, waited for before the
step; the sums are divided by the worker count (lossless)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from harness.schemes import Knobs, Range, Scheme, register
from harness.sim.bucketed import collective_channel
from harness.sim.des import Sim
from harness.sim.model import Model, Outcome


@dataclass(frozen=True)
class ToyKnobs(Knobs):
    reverse: Annotated[int, Range(ge=0, le=1)] = 0
    """1 = issue the all-reduces from the last tensor to the first"""


class Toy(Scheme):
    def after_backward(self) -> None:
        order = reversed(self.params) if self.knobs.reverse else self.params
        self.handles = [self.ctx.transport.allreduce_async(self.grad_of(p), f"toy{i}") for i, p in enumerate(order)]

    def wait(self) -> None:
        for h in self.handles:
            h.wait()
        for p in self.params:
            p.grad.div_(self.ctx.workers)


def simulate(c, cluster, knobs, p2p=None) -> Outcome:
    """Compute, then every tensor's all-reduce one after another on the collective channel, then the step."""
    sim = Sim()
    ab = cluster.allreduce_cost()
    chan = collective_channel(sim, ab)
    marks = {}

    def main():
        yield c.forward_s + c.backward_total_s
        marks["wait"] = sim.now
        yield [chan.submit_bytes(b, ab.alpha_s) for b in c.grad_bytes] if cluster.workers > 1 else []
        marks["opt"] = sim.now
        yield c.optimizer_s

    sim.process(main())
    end = sim.run()
    return Outcome(
        end,
        c.forward_s,
        c.backward_total_s,
        marks["opt"] - marks["wait"],
        c.optimizer_s,
        {"tensors": len(c.grad_bytes)},
    )


register("toy", Toy, "toy: one all-reduce per tensor after backward", knobs=ToyKnobs, model=Model(simulate))
