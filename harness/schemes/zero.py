"""`zero0`..`zero3`: DeepSpeed's engine with ZeRO stage 0-3, as DeepSpeed users run it.

The model and the one SGD recipe (harness.rank.worker.make_optimizer, passed as the client optimizer, hence
`zero_allow_untested_optimizer`) go to deepspeed.initialize; fp32 (or, for a bf16 cell, DeepSpeed's
own bf16 section: bf16 module, fp32 master copy in its optimizer wrapper, gradients reduced in its
communication_data_type, bf16 by default; docs/ARCHITECTURE.md, "Precision"), no loss scaling, no gradient
clipping (DeepSpeed clips to 1.0 unless told otherwise), one micro-batch per step. Backward is engine.backward
(the gradient reduction and ZeRO's partitioning hooks run there), the step is engine.step.

Stage 0 all-reduces gradients after backward in DeepSpeed's fixed 5e8-element buffers: no knobs.
Stages 1-3 knobs (None = DeepSpeed's default): reduce_bucket_mb / allgather_bucket_mb (DeepSpeed counts
these buckets in elements, default 5e8; we convert MB of fp32), overlap_comm (DeepSpeed: off for 1-2, on
for 3), contiguous_gradients (DeepSpeed: on).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

import torch

from harness.contracts.training import DTYPES
from harness.schemes.base import Scheme, register
from harness.schemes.knobs import Grid, Knobs, Range
from harness.sim.model import NoModel

MB = 1 << 20


@dataclass(frozen=True)
class ZeroKnobs(Knobs):
    """Knobs of stages 1-3 (stage 0 has none: DeepSpeed's fixed buffers)."""

    reduce_bucket_mb: Annotated[float | None, Range(gt=0), Grid(None, 25, 200)] = None
    """ZeRO reduce_bucket_size in MB of fp32 (None = DeepSpeed's 5e8 elements)"""
    allgather_bucket_mb: Annotated[float | None, Range(gt=0)] = None
    """ZeRO allgather_bucket_size in MB of fp32 (None = DeepSpeed's 5e8 elements; stages 1-2)"""
    overlap_comm: Annotated[int | None, Range(ge=0, le=1)] = None
    """1 = overlap gradient reduction with backward (None = DeepSpeed's: 0 for stages 1-2, 1 for stage 3)"""
    contiguous_gradients: Annotated[int | None, Range(ge=0, le=1)] = None
    """1 = copy gradients into one contiguous buffer (None = DeepSpeed's: 1)"""


NO_MODEL = NoModel(
    "ZeRO's schedule (bucketed reduce-scatter of gradients during or after backward, an all-gather of the "
    "updated parameters after the step; at stage 3 also per-layer all-gathers in forward and backward) is "
    "not simulated yet; measure it instead"
)


class Zero(Scheme):
    stage: int = 0
    native_precision = True  # DeepSpeed's bf16 section, not torch.autocast (its engine turns an outer autocast off)

    def config(self) -> dict:
        zero: dict = {"stage": self.stage}
        if isinstance(self.knobs, ZeroKnobs):
            zero.update(self._bucket_config(self.knobs))
        # DeepSpeed's batch sizes only feed its own data loader and throughput timer, neither of which
        # runs here (the harness feeds the batch); one step per micro-batch is what matters.
        return {
            "train_micro_batch_size_per_gpu": 1,
            "gradient_accumulation_steps": 1,
            "train_batch_size": self.ctx.workers,
            "zero_optimization": zero,
            "zero_allow_untested_optimizer": True,
            "gradient_clipping": 0.0,
            "fp16": {"enabled": False},
            "bf16": {"enabled": self.ctx.dtype == "bf16"},
            # floating buffers follow the bf16 parameters (DeepSpeed keeps them as loaded unless told, and
            # BatchNorm refuses bf16 weights beside fp32 running statistics)
            **({"data_types": {"buffer_dtype": "bf16"}} if self.ctx.dtype == "bf16" else {}),
            "steps_per_print": 1 << 30,
            "wall_clock_breakdown": False,
        }

    @staticmethod
    def _bucket_config(k: ZeroKnobs) -> dict:
        """The zero_optimization entries the knobs set (DeepSpeed's defaults where they are None)."""
        out: dict = {}
        elem = 4  # fp32 bytes per element
        if k.reduce_bucket_mb is not None:
            out["reduce_bucket_size"] = max(1, int(k.reduce_bucket_mb * MB / elem))
        if k.allgather_bucket_mb is not None:
            out["allgather_bucket_size"] = max(1, int(k.allgather_bucket_mb * MB / elem))
        if k.overlap_comm is not None:
            out["overlap_comm"] = bool(k.overlap_comm)
        if k.contiguous_gradients is not None:
            out["contiguous_gradients"] = bool(k.contiguous_gradients)
        return out

    def setup(self, model):
        import deepspeed  # optional heavy dependency: only the deepspeed backend has it

        model = super().setup(model)  # self.optimizer = the one SGD recipe
        self._grad_bytes = sum(p.numel() * p.element_size() for p in self.params)  # before ZeRO-3 shards them
        cfg = self.config()
        self.engine, _, _, _ = deepspeed.initialize(
            model=model, optimizer=self.optimizer, config=cfg, dist_init_required=False
        )
        self.model = model
        self._comm_dtype = self.engine.communication_data_type
        self._grad_bytes = self._grad_bytes * self._comm_dtype.itemsize // 4  # counted in fp32 above
        z = self.engine._config.zero_config
        self.plan = {
            "zero_stage": self.engine.zero_optimization_stage(),
            "reduce_bucket_size": int(z.reduce_bucket_size),
            "allgather_bucket_size": int(z.allgather_bucket_size),
            "overlap_comm": bool(z.overlap_comm),
            "contiguous_gradients": bool(z.contiguous_gradients),
        }
        assert self.plan["zero_stage"] == self.stage, self.plan
        return self.engine if self.ctx.dtype == "fp32" else _CastInputs(self.engine, DTYPES[self.ctx.dtype])

    def reduce_dtype(self) -> str:
        return next(name for name, dt in DTYPES.items() if dt == self._comm_dtype)

    def backward(self, loss) -> None:  # the loop calls this instead of loss.backward()
        self.engine.backward(loss)

    def step(self) -> None:
        self.engine.step()  # optimizer step (ZeRO: on this rank's partition, then all-gather) + zero_grad

    def comm_bytes_per_iter(self) -> int:
        return self._grad_bytes

    def final_parameters(self, model) -> dict:
        """Full parameters on every rank (ZeRO-3 keeps only a shard of each: gather, collectively)."""
        import deepspeed  # optional heavy dependency: only the deepspeed backend has it

        params = list(model.parameters())
        if self.stage == 3:
            with deepspeed.zero.GatheredParameters(params, modifier_rank=None):
                return {n: p.detach().cpu().clone() for n, p in model.named_parameters()}
        return {n: p.detach().cpu().clone() for n, p in model.named_parameters()}


class _CastInputs:
    """The engine of a bf16 cell, called with its floating-point inputs cast to bf16 first, as a DeepSpeed
    user feeds a bf16 module (token ids and labels stay integers)."""

    def __init__(self, engine, dtype):
        self.engine, self.dtype = engine, dtype

    def _cast(self, x):
        return x.to(self.dtype) if isinstance(x, torch.Tensor) and x.is_floating_point() else x

    def __call__(self, *args, **kwargs):
        return self.engine(*(self._cast(a) for a in args), **{k: self._cast(v) for k, v in kwargs.items()})


for _stage, _what in (
    (0, "DeepSpeed engine without ZeRO: gradients all-reduced after backward"),
    (1, "DeepSpeed ZeRO-1: optimizer state partitioned"),
    (2, "DeepSpeed ZeRO-2: gradients and optimizer state partitioned"),
    (3, "DeepSpeed ZeRO-3: parameters, gradients and optimizer state partitioned"),
):
    _cls = type(f"Zero{_stage}", (Zero,), {"stage": _stage})
    register(
        f"zero{_stage}",
        _cls,
        _what,
        needs=("deepspeed_engine",),
        knobs=Knobs if _stage == 0 else ZeroKnobs,
        model=NO_MODEL,
    )
