"""Per-layer hooks shared by the profiler's clock and its FLOP counter: which module owns which
parameters (the same owners ByteScheduler's engine hooks), a forward pre-hook per owner and a
post-accumulate-grad hook per tensor, and how forward stamps are charged to owners."""

from __future__ import annotations

import torch


def owners(model: torch.nn.Module, params: list) -> list[tuple[str, torch.nn.Module, list[int]]]:
    """(name, module, parameter indices) of each module that first holds parameters directly, in
    module order (the same rule as harness.schemes.bytescheduler)."""
    index = {id(p): i for i, p in enumerate(params)}
    seen: set[int] = set()
    out = []
    for name, mod in model.named_modules():
        mine = [index[id(p)] for p in mod.parameters(recurse=False) if id(p) in index and id(p) not in seen]
        if mine:
            seen.update(id(params[i]) for i in mine)
            out.append((name or "<root>", mod, mine))
    return out


def param_names(model, params) -> list[str]:
    names = {id(p): n for n, p in model.named_parameters()}
    return [names.get(id(p), "?") for p in params]


class LayerHooks:
    """Forward pre-hooks on owners and post-accumulate-grad hooks on tensors, calling back into
    whoever is recording (the timer or the counter)."""

    def __init__(self, own, params):
        self.on_layer = lambda j: None
        self.on_ready = lambda i: None
        self.handles = [
            mod.register_forward_pre_hook(lambda _m, _a, j=j: self.on_layer(j)) for j, (_, mod, _) in enumerate(own)
        ]
        self.handles += [
            p.register_post_accumulate_grad_hook(lambda _p, i=i: self.on_ready(i)) for i, p in enumerate(params)
        ]

    def remove(self):
        for h in self.handles:
            h.remove()


def charge_forward(events: list[tuple[float, int]], t0: float, t1: float, n_layers: int) -> list[float]:
    """Seconds per owner from pre-hook stamps: each interval to the owner whose start opened it; the
    stretch before the first owner goes to the first owner."""
    out = [0.0] * n_layers
    if not events:
        return out
    for k, (t, j) in enumerate(events):
        end = events[k + 1][0] if k + 1 < len(events) else t1
        out[j] += end - t
    out[events[0][1]] += events[0][0] - t0
    return out


def forward_order_of(events: list[tuple[float, int]], n_layers: int) -> list[int]:
    first: dict[int, int] = {}
    for k, (_, j) in enumerate(events):
        first.setdefault(j, k)
    ranked = sorted(range(n_layers), key=lambda j: first.get(j, len(events) + j))
    order = [0] * n_layers
    for pos, j in enumerate(ranked):
        order[j] = pos
    return order
