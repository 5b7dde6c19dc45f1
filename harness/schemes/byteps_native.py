"""`byteps`: BytePS's own DistributedOptimizer as its users run it (backend byteps only)."""

from __future__ import annotations

from harness.schemes.base import Scheme, register
from harness.sim.model import NoModel


class BytePSNative(Scheme):
    """bps.DistributedOptimizer: gradients pushed/pulled during backward, BytePS's own partitioning and
    priority scheduling; parameters broadcast from rank 0 first."""

    def setup(self, model):
        import byteps.torch as bps  # optional: only the byteps backend has BytePS

        model = super().setup(model)
        bps.broadcast_parameters(model.state_dict(), root_rank=0)
        named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
        self.optimizer = bps.DistributedOptimizer(self.optimizer, named_parameters=named)
        bps.broadcast_optimizer_state(self.optimizer, root_rank=0)
        return model

    def wait(self) -> None:
        self.optimizer.synchronize()

    def step(self) -> None:
        with self.optimizer.skip_synchronize():
            self.optimizer.step()
        self.optimizer.zero_grad()


register(
    "byteps",
    BytePSNative,
    "BytePS DistributedOptimizer: push-pull via its servers, its own scheduling",
    needs=("byteps_engine",),
    parameter_server=True,  # a BytePS job always has >= 1 server (DMLC_NUM_SERVER)
    model=NoModel(
        "BytePS's own scheduling (its partitioning, priorities and server-side engine) is not "
        "simulated; the bsp-ps/wfbp-ps/bytescheduler-ps models cover the study's BytePS runs"
    ),
)
