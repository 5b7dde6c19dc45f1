"""DeAR (harness.schemes.dear) as a simulation: the model registered beside the `dear` scheme
(docs/ARCHITECTURE.md, "Predictor"), and the bucket rule the scheme itself plans with (`dear_groups`).

One iteration of DeAR on one collective channel (one communicator, collectives in issue order):
  - backward: a bucket's reduce-scatter is issued once all its gradients are ready and every bucket
    after it in forward order has been issued (buckets are issued last-layer first, the same order on
    every rank);
  - after backward: wait for every reduce-scatter (the loop's comm wait), then issue the all-gathers
    in forward order;
  - next forward: each layer first waits for its own bucket's all-gather, steps its optimizer, then
    computes.
A ring reduce-scatter or all-gather moves (N-1)/N of the message over every ring edge in N-1 steps:
half an all-reduce's alpha and beta (network.py's ring model; a measured all-reduce fit is halved
likewise, an approximation).
Iteration time = start of forward 2 - start of forward 1 (forward 1 waits for round 0's all-gathers,
as every steady-state iteration does).
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from harness.grouping.cost import MB
from harness.sim.bucketed import collective_channel
from harness.sim.des import Event, Sim
from harness.sim.model import Outcome

if TYPE_CHECKING:  # annotations only
    from harness.sim.links import Cluster
    from harness.sim.model import ComputeModel


def dear_groups(layer_bytes: list[int], bucket_bytes: float, nearby_layers: int = 0) -> list[list[int]]:
    """Buckets of consecutive layers (indices in forward order). nearby_layers > 0: that many layers per
    bucket. Else a layer joins the open bucket while the bucket is empty or stays under `bucket_bytes`
    (strictly), as DeAR's threshold grouping does; a larger layer opens a bucket of its own."""
    groups: list[list[int]] = []
    cur: list[int] = []
    size = 0
    for j, b in enumerate(layer_bytes):
        fits = len(cur) < nearby_layers if nearby_layers > 0 else (not cur or size + b < bucket_bytes)
        if not fits:
            groups.append(cur)
            cur, size = [], 0
        cur.append(j)
        size += b
    if cur:
        groups.append(cur)
    return groups


def half_collective(ab):
    """alpha/beta of a reduce-scatter or all-gather from an all-reduce's (see the module docstring)."""
    return replace(
        ab,
        alpha_s=ab.alpha_s / 2,
        beta_s_per_byte=ab.beta_s_per_byte / 2,
        burst_bytes=ab.burst_bytes * 2,
        beta_peak_s_per_byte=ab.beta_peak_s_per_byte / 2,
        planning=None,
    )


def padded(nbytes: int, workers: int, elem: int = 4) -> int:
    """Bytes of a bucket padded to a multiple of the workers (the scheme's buffers)."""
    n = nbytes // elem
    return -(-n // workers) * workers * elem


class _DearRun:
    def __init__(self, c: ComputeModel, cluster: Cluster, knobs: dict):
        self.sim = sim = Sim()
        self.c = c
        self.workers = cluster.workers
        layer_bytes = [sum(c.grad_bytes[i] for i in m) for m in c.layers]
        self.groups = dear_groups(layer_bytes, knobs["bucket_mb"] * MB, int(knobs.get("nearby_layers") or 0))
        self.group_of_layer = {j: g for g, m in enumerate(self.groups) for j in m}
        self.group_of_param = {i: self.group_of_layer[j] for j, m in enumerate(c.layers) for i in m}
        self.bytes = [padded(sum(layer_bytes[j] for j in m), max(1, self.workers)) for m in self.groups]
        self.ab = half_collective(cluster.allreduce_cost())
        self.chan = collective_channel(sim, self.ab)
        self.marks: dict = {}

    def collective(self, g: int) -> Event:
        if self.workers <= 1:
            return self.sim.timeout(0.0)
        return self.chan.submit_bytes(self.bytes[g], self.ab.alpha_s)

    def main(self):
        c, sim, G = self.c, self.sim, len(self.groups)
        gathered: list[Event] | None = None
        for it in range(3):
            self.marks[f"start{it}"] = sim.now
            for j in range(len(c.layers)):
                if gathered is not None:
                    yield gathered[self.group_of_layer[j]]
                    yield c.layer_optimizer_s[j]
                yield c.layer_forward_s[j]
            self.marks[f"fwd{it}"] = sim.now - self.marks[f"start{it}"]
            missing = [sum(len(c.layers[j]) for j in m) for m in self.groups]
            issued: list[Event | None] = [None] * G
            state = {"next": G - 1}  # issue order: last bucket first

            def ready(i, missing=missing, issued=issued, state=state):
                missing[self.group_of_param[i]] -= 1
                while state["next"] >= 0 and missing[state["next"]] == 0:
                    issued[state["next"]] = self.collective(state["next"])
                    state["next"] -= 1

            for i in range(len(c.numels)):
                sim.at(min(c.ready_s[i], c.backward_total_s), ready, i)
            yield c.backward_total_s
            while state["next"] >= 0:  # gradients whose hook did not fire: issued after backward
                issued[state["next"]] = self.collective(state["next"])
                state["next"] -= 1
            t = sim.now
            yield list(issued)
            self.marks[f"wait{it}"] = sim.now - t
            gathered = [self.collective(g) for g in range(G)]

    def run(self) -> Outcome:
        self.sim.process(self.main())
        self.sim.run()
        m, c = self.marks, self.c
        # iteration 1 runs from start1 to start2 (start2 is reached once forward 2 begins)
        return Outcome(
            m["start2"] - m["start1"],
            m["fwd1"],
            c.backward_total_s,
            m["wait1"],
            0.0,
            {"buckets": len(self.groups), "bucket_mb": [round(b / MB, 3) for b in self.bytes], "layers": len(c.layers)},
        )


def dear(c: ComputeModel, cluster: Cluster, knobs: dict, p2p=None) -> Outcome:
    """The model of `dear`."""
    return _DearRun(c, cluster, knobs).run()
