"""`horovod`: Horovod's own DistributedOptimizer as users run it: gradient hooks hand every gradient to
Horovod's background thread during backward, which fuses what is outstanding (up to the fusion
threshold, every cycle time) into one all-reduce; `synchronize()` waits before the step.

Knobs are Horovod's: fusion_threshold_mb (HOROVOD_FUSION_THRESHOLD; 0 disables fusion) and cycle_time_ms
(HOROVOD_CYCLE_TIME). They are read by hvd.init(), so the launcher passes them (horovodrun's
--fusion-threshold-mb / --cycle-time-ms); the scheme checks that the ranks really run with them.
Defaults are Horovod 0.28.1's own: 128 MB and 1 ms (horovod/common/operations.cc).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Annotated

from harness.core.errors import UserError
from harness.schemes.base import Scheme, register
from harness.schemes.knobs import Grid, Knobs, Range
from harness.sim.horovod import horovod
from harness.sim.model import Model

MB = 1 << 20


@dataclass(frozen=True)
class HorovodKnobs(Knobs):
    fusion_threshold_mb: Annotated[int, Range(ge=0), Grid(0, 8, 32, 128)] = 128
    """HOROVOD_FUSION_THRESHOLD in MB (Horovod's default 128); 0 disables tensor fusion"""
    cycle_time_ms: Annotated[float, Range(ge=0)] = 1.0
    """HOROVOD_CYCLE_TIME, ms between fusion cycles (Horovod's default 1)"""


class HorovodNative(Scheme):
    def setup(self, model):
        import horovod.torch as hvd  # optional heavy dependency: only the horovod backend has it

        model = super().setup(model)  # self.optimizer = the one SGD recipe
        self._check_env()
        hvd.broadcast_parameters(model.state_dict(), root_rank=0)
        named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
        self.optimizer = hvd.DistributedOptimizer(self.optimizer, named_parameters=named, op=hvd.Average)
        hvd.broadcast_optimizer_state(self.optimizer, root_rank=0)
        self.plan = {
            "fusion_threshold_mb": self.knobs.fusion_threshold_mb,
            "cycle_time_ms": self.knobs.cycle_time_ms,
            "HOROVOD_FUSION_THRESHOLD": os.environ.get("HOROVOD_FUSION_THRESHOLD", ""),
            "HOROVOD_CYCLE_TIME": os.environ.get("HOROVOD_CYCLE_TIME", ""),
        }
        return model

    def _check_env(self) -> None:
        want = {
            "HOROVOD_FUSION_THRESHOLD": int(self.knobs.fusion_threshold_mb) * MB,
            "HOROVOD_CYCLE_TIME": float(self.knobs.cycle_time_ms),
        }
        for var, value in want.items():
            got = os.environ.get(var)
            if got is None or float(got) != float(value):
                raise UserError(
                    f"{var}={got!r} in this rank but the cell asks for {value}: start horovod "
                    f"cells through ddlbench (horovodrun with the knobs as flags)"
                )

    def wait(self) -> None:
        self.optimizer.synchronize()  # every gradient's all-reduce done (averaged in place)

    def step(self) -> None:
        with self.optimizer.skip_synchronize():
            self.optimizer.step()
        self.optimizer.zero_grad()  # Horovod's zero_grad takes no set_to_none (torch's default: None)


register(
    "horovod",
    HorovodNative,
    "Horovod DistributedOptimizer: tensor fusion of gradients handed over during backward",
    needs=("horovod_engine",),
    knobs=HorovodKnobs,
    model=Model(horovod),
)
