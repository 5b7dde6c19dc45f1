"""PyTorch FSDP2 (harness.schemes.fsdp) as a simulation: the model registered beside the `fsdp` scheme
(docs/ARCHITECTURE.md, "Predictor"), and the wrapping rule the scheme itself applies (`block_units`).

Units: `wrap=block` shards each of the model's repeated units (transformer blocks, ResNet stages: see
block_units) and then the root, which holds everything else; `wrap=model` the root alone. One iteration
on one collective channel (one process group, collectives in issue order), message m = a unit's bytes,
a ring reduce-scatter or all-gather costing half an all-reduce (dear_sim.half_collective):
  - forward: the root's all-gather, then per unit in forward order its all-gather, waited for, then its
    compute (no forward prefetch: what FSDP2 does on CPU/gloo without explicit prefetch settings; on a
    GPU the CPU runs ahead of the kernels, so there the forward all-gathers overlap more than modelled);
  - backward, units in the order their gradients finish: with reshard_after_forward each unit is
    all-gathered again (the next one is prefetched when a unit's backward starts, FSDP2's implicit
    backward prefetch); after a unit's backward its gradients are reduce-scattered; the root's last;
    backward ends when every reduce-scatter has (FSDP2's final callback waits for them);
  - the optimizer steps on shards: 1/N of the one-worker optimizer time.
The root is never resharded after forward (FSDP2 keeps the root's parameters for backward).
Profiles without layer names (older tables) are simulated as one unit.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from harness.grouping.cost import MB
from harness.sim.bucketed import collective_channel
from harness.sim.dear import half_collective, padded
from harness.sim.des import Event, Sim
from harness.sim.model import Outcome

if TYPE_CHECKING:  # annotations only
    from harness.sim.links import Cluster
    from harness.sim.model import ComputeModel

_INDEX = re.compile(r"^\d+$")


def block_units(names: list[str]) -> list[str]:
    """The block units among module names (each a module holding parameters, or an ancestor of one):
    the children `P.<i>` of the shallowest lists P (ModuleList/Sequential, whose children are numbered)
    with at least two numbered children holding parameters: transformer blocks (bert.encoder.layer.<i>,
    transformer.h.<i>), ResNet stages (resnet.encoder.stages.<i>), a CNN's feature layers. Every list at
    that depth contributes its children (VGG: features.<i> and classifier.<i>). Forward (name) order."""
    children: dict[str, list[str]] = {}
    for name in names:
        parts = name.split(".")
        for k, part in enumerate(parts):
            if k and _INDEX.match(part):
                parent, child = ".".join(parts[:k]), ".".join(parts[: k + 1])
                kids = children.setdefault(parent, [])
                if child not in kids:
                    kids.append(child)
    lists = {p: kids for p, kids in children.items() if len(kids) >= 2}
    if not lists:
        return []
    depth = min(p.count(".") for p in lists)
    units = [u for p, kids in lists.items() if p.count(".") == depth for u in kids]
    first = {}
    for k, name in enumerate(names):
        for u in units:
            if (name == u or name.startswith(u + ".")) and u not in first:
                first[u] = k
    return sorted(units, key=lambda u: first.get(u, len(names)))


def unit_of(name: str, units: list[str]) -> int:
    """Index of the unit a module belongs to (-1 = the root)."""
    for k, u in enumerate(units):
        if name == u or name.startswith(u + "."):
            return k
    return -1


class _FsdpRun:
    def __init__(self, c: ComputeModel, cluster: Cluster, knobs: dict):
        self.sim = sim = Sim()
        self.c = c
        self.W = max(1, cluster.workers)
        self.reshard = bool(knobs.get("reshard_after_forward", 1))
        names = list(getattr(c, "layer_names", ()) or ())
        units = block_units(names) if knobs.get("wrap", "block") == "block" and len(names) == len(c.layers) else []
        # unit 0 = the root; block units 1..U in forward order
        self.unit_of_layer = [unit_of(n, units) + 1 for n in names] if units else [0] * len(c.layers)
        self.U = len(units) + 1
        unit_bytes = [0] * self.U
        for j, m in enumerate(c.layers):
            unit_bytes[self.unit_of_layer[j]] += sum(c.grad_bytes[i] for i in m)
        self.bytes = [padded(b, self.W) for b in unit_bytes]
        self.ab = half_collective(cluster.allreduce_cost())
        self.chan = collective_channel(sim, self.ab)
        self.marks: dict = {}
        self.sent = 0.0

    def collective(self, u: int) -> Event:
        if self.W <= 1 or self.bytes[u] == 0:
            return self.sim.timeout(0.0)
        self.sent += self.bytes[u]
        return self.chan.submit_bytes(self.bytes[u], self.ab.alpha_s)

    def backward_segments(self) -> list[tuple[int, float]]:
        """(unit, compute seconds) in the order units finish backward (compute alone)."""
        c = self.c
        end = [0.0] * self.U
        for j, m in enumerate(c.layers):
            u = self.unit_of_layer[j]
            end[u] = max([end[u]] + [min(c.ready_s[i], c.backward_total_s) for i in m])
        blocks = sorted(range(1, self.U), key=lambda u: end[u])
        out, prev = [], 0.0
        for u in blocks:
            out.append((u, max(0.0, end[u] - prev)))
            prev = max(prev, end[u])
        out.append((0, max(0.0, c.backward_total_s - prev)))  # the root (embeddings, ready last)
        return out

    def main(self):
        c, sim, marks = self.c, self.sim, self.marks
        marks["start"] = sim.now
        root = self.collective(0)
        yield root
        gathered = {0: root}
        for j, f in enumerate(c.layer_forward_s):
            u = self.unit_of_layer[j]
            if u not in gathered:
                gathered[u] = self.collective(u)
                yield gathered[u]
            yield f
        marks["bwd"] = sim.now
        segs = self.backward_segments()
        ags: dict = {}
        if self.reshard and segs and segs[0][0] != 0:
            ags[segs[0][0]] = self.collective(segs[0][0])
        reduces = []
        for k, (u, d) in enumerate(segs):
            if u != 0 and self.reshard:
                yield ags[u]
            nxt = segs[k + 1][0] if k + 1 < len(segs) else 0
            if self.reshard and nxt != 0 and nxt not in ags:
                ags[nxt] = self.collective(nxt)  # backward prefetch of the next unit
            yield d
            reduces.append(self.collective(u))
        yield reduces
        marks["opt"] = sim.now
        yield c.optimizer_s / self.W
        marks["end"] = sim.now

    def run(self) -> Outcome:
        self.sim.process(self.main())
        self.sim.run()
        m = self.marks
        return Outcome(
            m["end"] - m["start"],
            m["bwd"] - m["start"],
            m["opt"] - m["bwd"],
            0.0,
            m["end"] - m["opt"],
            {
                "units": self.U,
                "reshard_after_forward": int(self.reshard),
                "collective_mb_per_iter": round(self.sent / MB, 3),
            },
        )


def fsdp(c: ComputeModel, cluster: Cluster, knobs: dict, p2p=None) -> Outcome:
    """The model of `fsdp`."""
    return _FsdpRun(c, cluster, knobs).run()
