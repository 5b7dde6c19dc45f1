"""FLOPs and memory bytes per layer, counted with torch.utils.flop_counter's formulas on a `meta` copy
of the model (shapes only, no compute) and charged to the same intervals the profiler times: forward,
the running owner; backward, the stretch that ends at the next gradient ready."""

from __future__ import annotations

import torch
from torch.utils._pytree import tree_leaves
from torch.utils.flop_counter import FlopCounterMode

from harness.sim.layer_hooks import LayerHooks, forward_order_of, owners, param_names


class _ChargingCounter(FlopCounterMode):
    """FlopCounterMode whose per-op FLOPs (and bytes moved) are also charged to the running interval:
    a forward owner, or the backward stretch that ends at the next gradient ready."""

    def __init__(self, n_layers: int, n_params: int):
        super().__init__(display=False)
        self.phase = "forward"
        self.layer: int | None = None
        self.pre_flops = self.pre_bytes = 0.0  # forward ops before the first owner starts
        self.fwd_flops = [0.0] * n_layers
        self.fwd_bytes = [0.0] * n_layers
        self.bwd_flops = [0.0] * n_params
        self.bwd_bytes = [0.0] * n_params
        self.pending_flops = self.pending_bytes = 0.0
        self.last_ready: int | None = None
        self._view: dict = {}

    def _is_view(self, packet) -> bool:
        v = self._view.get(packet)
        if v is None:
            v = False
            try:
                schema = getattr(packet, packet.overloads()[0])._schema
                alias = schema.returns[0].alias_info if schema.returns else None
                v = alias is not None and not alias.is_write
            except Exception:  # unknown op shape: count its bytes
                v = False
            self._view[packet] = v
        return v

    def _count_flops(self, func_packet, out, args, kwargs):
        flops = 0
        if func_packet in self.flop_registry:
            flops = self.flop_registry[func_packet](*args, **kwargs, out_val=out)
        nbytes = 0
        if not self._is_view(func_packet):
            for t in tree_leaves((args, kwargs, out)):
                if isinstance(t, torch.Tensor):
                    nbytes += t.numel() * t.element_size()
        if self.phase == "forward":
            if self.layer is None:
                self.pre_flops += flops
                self.pre_bytes += nbytes
            else:
                self.fwd_flops[self.layer] += flops
                self.fwd_bytes[self.layer] += nbytes
        else:
            self.pending_flops += flops
            self.pending_bytes += nbytes
        return super()._count_flops(func_packet, out, args, kwargs)

    def enter_layer(self, j: int) -> None:
        if self.phase != "forward":
            return
        if self.layer is None:
            self.fwd_flops[j] += self.pre_flops
            self.fwd_bytes[j] += self.pre_bytes
        self.layer = j

    def ready(self, i: int) -> None:
        self.bwd_flops[i] += self.pending_flops
        self.bwd_bytes[i] += self.pending_bytes
        self.pending_flops = self.pending_bytes = 0.0
        self.last_ready = i


def count_costs(spec, batch: int, seq_len, device="meta"):
    """FLOPs and bytes per forward owner and per backward interval, and the backward ready order,
    from one forward + backward of a copy of the model on `device` (meta: shapes only, no compute)."""
    with torch.device(device):
        model = spec.build()
    model.train()
    params = [p for p in model.parameters() if p.requires_grad]
    own = owners(model, params)
    data = spec.make_batch(batch, seq_len=seq_len, device=device, seed=12345)
    counter = _ChargingCounter(len(own), len(params))
    hooks = LayerHooks(own, params)
    ready_seq: list[int] = []
    fwd_seq: list[int] = []

    def on_layer(j):
        fwd_seq.append(j)
        counter.enter_layer(j)

    def on_ready(i):
        counter.ready(i)
        ready_seq.append(i)

    hooks.on_layer, hooks.on_ready = on_layer, on_ready
    try:
        with counter:
            loss = spec.loss(model, data)
            counter.phase = "backward"
            loss.backward()
    finally:
        hooks.remove()
    if counter.last_ready is not None:  # trailing backward ops: charge the last ready tensor
        counter.bwd_flops[counter.last_ready] += counter.pending_flops
        counter.bwd_bytes[counter.last_ready] += counter.pending_bytes
    never = [i for i in range(len(params)) if i not in set(ready_seq)]
    return {
        "model": model,
        "params": params,
        "owners": own,
        "names": param_names(model, params),
        "fwd_flops": counter.fwd_flops,
        "fwd_bytes": counter.fwd_bytes,
        "bwd_flops": counter.bwd_flops,
        "bwd_bytes": counter.bwd_bytes,
        "ready_seq": ready_seq + never,
        "forward_order": forward_order_of([(0.0, j) for j in fwd_seq], len(own)),
    }
