"""The study's transports calibrated from two nodes (docs/ARCHITECTURE.md, "Calibration"): on top of the one-node
fit (harness/study/calibration.py), the methods' 8-GPU throughputs on two nodes fix the named parameters of each
network's transports, the first cells where every method crosses the network.

One node cannot see them: its ring never leaves the node and one node of BytePS runs no server. Two nodes can,
and what a user has before asking about a larger cluster is exactly that: a one-node run and a short run across
two. The parameters are physical quantities of one transport, shared by every workload and by every method that
uses the same path (no factor per cell, workload or method), in blocks fitted in turn, each to the cells that
depend on it: on each network, NCCL's ring first (the all-reduce methods' cells, which depend on nothing of
BytePS), then BytePS on it (the PS methods' cells):

- NCCL over IB: its rate through the node's NIC without GPUDirect (`ib_gbyte_s`) and the node's host path
  (`host_path_gbyte_s`), which one node cannot tell from NCCL's edge but the ring across nodes shows (host path /
  (GPUs + 1)); BytePS over RDMA: ps-lite's RDMA van per message (`rdma_message_s`), the servers' summation
  (`server_sum_gbyte_s`, shared by every network's servers: fitted where the wire binds least) and BytePS's
  per-partition costs that one node cannot show (no server there): the local coordination per stage
  (`byteps_signal_s`) and a server's handling of each push and pull (`server_recv_s`);
- NCCL over 10 GbE: the TCP payload rate its sockets reach (`eth_gbit_s`) and the kernel's cost per message
  (`tcp_message_s`, shared with IPoIB and BytePS); BytePS over 10 GbE: ps-lite's ZeroMQ van, one I/O thread per
  process carrying both directions at a 1500-byte MTU (`eth_van_gbyte_s`);
- NCCL over IPoIB: one TCP stream per ring edge (`ipoib_gbit_s`); BytePS over IPoIB: one worker-server
  connection (`ipoib_stream_gbit_s`) and the van over it (`zmq_van_gbyte_s`, whose loopback figure is its
  source). What a node's IPoIB interface carries for BytePS at once (`ipoib_nic_gbit_s`) keeps its sourced range:
  with pushes and pulls alike, its rate each way and the van's both ways together bind the same cells (a
  synthetic table cannot tell them apart).

Overlapped backward slows the part of a collective that runs on the GPU and its node's path (NCCL's hops through
host memory, BytePS's copies and in-node reductions), not the wire (harness/sim/links.slower_of): the one-node
fit's `overlap_comm_slowdown` applies to that part only.

A cell that ran on another network than its label says is not evidence about that label's transport: an IPoIB
cell of a PS method that equals its 10 GbE or its IB cell within their spread most likely did not go over IPoIB
(the study's note beside the table says so); such cells are set aside, named, and neither fitted nor counted.

A table has the study's columns (workload, batch, network, scheme, gpus, throughput, std) with gpus = 8 rows for
every method of the study on each of its networks, or is a run directory of the harness (its summary at 8
workers).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from harness.core.errors import UserError
from harness.predict.calibration import FittedCells, OfItsCluster, leave_one_workload_out
from harness.predict.fitting import Block, Cells, Fit, fit_params
from harness.predict.predictor import SEVEN_METHODS, predict_rows
from harness.study.calibration import (
    BLOCKS,
    Calibration,
    calibration_models,
    fitted_cells,
    held_out_rows,
    read_one_node,
    table_cells,
)
from harness.study.cluster import FAMILIES, GPUS_PER_NODE, study_network
from harness.study.curve import WORKLOADS, study_compute
from harness.study.inputs import StudyValues

TWO_NODE_TABLE = Path(__file__).with_name("two_node.csv")
"""The study's two-node column (Shi et al., arXiv 2005.13247, results of 2020-05-29): 8 GPUs on two nodes."""
NODES = 2
GPUS = NODES * GPUS_PER_NODE
MISLABEL_FLOOR = 0.02
"""Two cells are equal within their spread when they differ by less than their stds added, or by less than this
share of their mean where the study reports one run (std 0): the run-to-run spread of its other cells."""
PS = ("bsp-ps", "wfbp-ps", "bytescheduler-ps")


LINE_GBIT_S = {"ib-100g": 100.0, "eth-10g": 10.0}
"""The networks' signalling rates (InfiniBand EDR 4x, 10GBASE): no payload rate can exceed them; a fitted rate
near them is a finding (harness/study/calibration.toml bounds the rates by them)."""
A2A = ("bsp-a2a", "wfbp-a2a", "mgwfbp", "bytescheduler-a2a")
"""The methods on NCCL's ring (Horovod, and ByteScheduler on it)."""
TRANSPORTS = {name: (b.network, b.methods, b.params) for name, b in BLOCKS["two-node"].items()}
"""The transport blocks, fitted in this order (later blocks keep the earlier ones' shared parameters)."""


def read_two_node(path: str | Path) -> pd.DataFrame:
    """The two-node table at `path` (the one-node reader's formats), its 8-GPU rows, checked: every network of
    the study and every method on it, or a one-line error naming what is missing."""
    df = read_one_node(path)
    df = df[df["gpus"] == GPUS]
    source = str(path)
    for net in FAMILIES:
        have = set(df.loc[df["network"] == net, "scheme"])
        if not have:
            raise UserError(
                f"two-node table {source}: no {GPUS}-GPU rows on {net}; its transports ("
                f"{_block_params(net)}) rest on them: add that network's two-node cells"
            )
        missing = [m for m in SEVEN_METHODS if m not in have]
        if missing:
            raise UserError(
                f"two-node table {source}: no {GPUS}-GPU rows of {', '.join(missing)} on {net}; the "
                f"transports a method crosses are fitted to its cells: add them"
            )
    return df.reset_index(drop=True)


def _block_params(network: str) -> str:
    return ", ".join(p.name for net, _, params in TRANSPORTS.values() if net == network for p in params)


def mislabelled(df: pd.DataFrame) -> pd.DataFrame:
    """The IPoIB cells of the PS methods that equal their 10 GbE or IB cell within their spread where those two
    differ (see the module docstring), with the network they agree with."""
    key = ["workload", "scheme"]
    by = {net: df[df["network"] == net].set_index(key) for net in FAMILIES}
    rows = []
    for k, cell in by["ipoib-100g"].iterrows():
        if k[1] not in PS:
            continue
        if k not in by["eth-10g"].index or k not in by["ib-100g"].index:
            continue
        if _same(by["eth-10g"].loc[k], by["ib-100g"].loc[k]):
            continue  # the networks do not differ here (compute-bound): the cell agrees with every label
        for other in ("eth-10g", "ib-100g"):
            o = by[other].loc[k]
            if _same(cell, o):
                rows.append(
                    {
                        "workload": k[0],
                        "scheme": k[1],
                        "network": "ipoib-100g",
                        "throughput": cell["throughput"],
                        "agrees_with": other,
                        "other_throughput": o["throughput"],
                    }
                )
                break
    return pd.DataFrame(
        rows, columns=["workload", "scheme", "network", "throughput", "agrees_with", "other_throughput"]
    )


def _same(a, b) -> bool:
    spread = max(a["std"] + b["std"], MISLABEL_FLOOR * (a["throughput"] + b["throughput"]) / 2)
    return abs(a["throughput"] - b["throughput"]) <= spread


def cells_of(df: pd.DataFrame, workloads, skip: pd.DataFrame | None = None) -> Cells:
    """The two-node cells of these workloads to fit (the mislabelled ones set aside)."""
    out = df[df["workload"].isin(workloads) & df["scheme"].isin(SEVEN_METHODS)]
    if skip is not None and len(skip):
        drop = set(zip(skip["workload"], skip["network"], skip["scheme"]))
        out = out[[k not in drop for k in zip(out["workload"], out["network"], out["scheme"])]]
    return table_cells(out)


class TwoNode:
    """The study's two nodes for a set of input values: every asked cell's predicted throughput, each network
    simulated once per workload and method."""

    def __init__(self, models: list):
        self.models = {m.workload: m for m in models}

    def __call__(self, v: dict, keys) -> dict:
        workloads = sorted({k[0] for k in keys})
        v = StudyValues.of(v)
        scaled = [study_compute(self.models[w], v).scaled(v.compute.compute_scale) for w in workloads]
        x = {}
        for net in sorted({k[1] for k in keys}):
            methods = [m for m in SEVEN_METHODS if any(k[1] == net and k[2] == m for k in keys)]
            sn = study_network(v, net, NODES)
            df = predict_rows(
                scaled,
                [sn.network],
                [NODES],
                GPUS_PER_NODE,
                methods,
                servers=NODES,
                knobs=sn.knobs,
                run_id="calibration",
                server_hosts="dedicated",
            )
            # the columns read, not itertuples: a tuple of all ~90 columns per row was 4% of the fit
            x.update(zip(zip(df["workload"], [net] * len(df), df["scheme"]), df["throughput_median"]))
        return {k: x.get(k, math.nan) for k in keys}


SCAN_PER_PARAM = 12
"""Latin-hypercube points scanned per parameter before each transport block's search: a rate binds only below the
rate of the path's slowest other part, so at its sourced value it often moves no cell and a local search alone
stays there; the more parameters a block has, the more points it needs to find the basin."""


def blocks_for(cells: Cells) -> list[Block]:
    return [
        Block(
            name, params, tuple(k for k in cells.mean if k[1] == net and k[2] in methods), SCAN_PER_PARAM * len(params)
        )
        for name, (net, methods, params) in TRANSPORTS.items()
    ]


def fit_transports(
    df: pd.DataFrame, workloads, models: list, start: dict, skip: pd.DataFrame | None = None, starts: int = 2
):
    """The transport blocks fitted to these workloads' two-node cells, every other input at `start` (the
    one-node fit's values)."""
    cells = cells_of(df, workloads, skip)
    predict = TwoNode([m for m in models if m.workload in workloads])
    return fit_params(blocks_for(cells), predict, cells, dict(start), starts=starts, polish=False), cells


def _fold(df, workloads, models, start, skip, starts, held) -> pd.DataFrame:
    """One leave-one-workload-out fold: the transports fitted to the other workloads' cells, the held-out
    workload's cells predicted."""
    fit, _ = fit_transports(df, [w for w in workloads if w != held], models, start, skip, starts)
    cells = cells_of(df, [held], skip)
    got = TwoNode([m for m in models if m.workload == held])(fit.values, list(cells.mean))
    return held_out_rows(held, cells, got)


def lowo_table(lowo_rows: pd.DataFrame) -> pd.DataFrame:
    """Median absolute leave-one-workload-out error per method and network."""
    t = lowo_rows.assign(abs_error=lowo_rows["error"].abs())
    out = t.pivot_table(index="scheme", columns="network", values="abs_error", aggfunc="median")
    return out.reindex(
        index=[m for m in SEVEN_METHODS if m in out.index], columns=[n for n in FAMILIES if n in out.columns]
    )


@dataclass
class TwoNodeCalibration(OfItsCluster, FittedCells):
    """The one-node calibration with the transports fitted on top from two nodes: what `ddlbench predict
    --calibrate ONE --calibrate TWO` and the study's report predict from."""

    one: Calibration
    """The one-node fit (the stacks' software costs)."""
    fit: Fit
    """The transport fit; `converged` and `message` speak for both fits."""
    cells: pd.DataFrame
    """The two-node cells: measured, std, predicted, error (the set-aside ones without a prediction)."""
    skipped: pd.DataFrame
    """The cells set aside as run on another network than their label (`mislabelled`)."""
    lowo: pd.DataFrame | None
    """Leave-one-workload-out on the two-node column."""
    source: str

    def draws(self, n: int, seed: int = 0) -> list[dict]:
        """n value sets of every fitted parameter: each fit's bootstrap, drawn apart (their cells are apart)."""
        return [{**a, **b} for a, b in zip(self.one.draws(n, seed), self.fit.draws(n, seed + 1))]

    def table(self) -> pd.DataFrame:
        two = pd.DataFrame(self.fit.table())
        two["block"] = [block_of(p) for p in two["parameter"]]
        return pd.concat([self.one.table().assign(block="one node"), two], ignore_index=True)


def block_of(param: str) -> str:
    return next(name for name, (_, _, params) in TRANSPORTS.items() if any(p.name == param for p in params))


def calibrate_two_node(
    one: Calibration,
    one_node: pd.DataFrame,
    table: str | Path | pd.DataFrame,
    profiles: Path | dict | None = None,
    lowo: bool = True,
    starts: int = 2,
) -> TwoNodeCalibration:
    """The transports fitted to a two-node table on top of the one-node calibration `one` (its values are every
    other input's; `one_node` its table, whose single-GPU rows calibrate the compute); with `lowo`, also each
    workload's two-node cells predicted from a fit to the others'."""
    source = str(table) if not isinstance(table, pd.DataFrame) else "the two-node table"
    df = read_two_node(table) if not isinstance(table, pd.DataFrame) else table
    workloads = [w for w in WORKLOADS if w in set(df["workload"])]
    missing = [w for w in WORKLOADS if w not in workloads]
    if missing:
        raise UserError(
            f"two-node table {source}: no rows of {', '.join(missing)}; the transports are shared by "
            f"the study's workloads and checked by leaving each out: add that workload's cells"
        )
    models = calibration_models(one_node, workloads, profiles)
    skip = mislabelled(df)

    def whole():
        return fit_transports(df, workloads, models, one.values, skip, starts)

    def fold(held: str) -> pd.DataFrame:
        return _fold(df, workloads, models, one.values, skip, starts, held)

    (fit, cells), held = leave_one_workload_out(workloads, fold, whole) if lowo else (whole(), None)
    fit.converged = fit.converged and one.fit.converged
    fit.message = f"one node: {one.fit.message}; two nodes: {fit.message}"
    rows = fitted_cells(fit, cells)
    return TwoNodeCalibration(one, fit, rows, skip, held, source)


def coverage(pred: pd.DataFrame, cells: pd.DataFrame, held: pd.DataFrame | None = None) -> dict:
    """How many measured two-node cells fall inside the predicted curve's [pred_low, pred_high] at 8 GPUs: the
    fitted cells against the curve, and the held-out ones against their leave-one-workload-out prediction with the
    curve's relative interval around it (that fit's own interval is not computed: an approximation, said so)."""
    at = pred[pred["workers"] == GPUS].set_index(["workload", "network", "scheme"])
    key = list(zip(cells["workload"], cells["network"], cells["scheme"]))
    have = [k in at.index for k in key]
    fitted = cells[have]
    lo, hi = (
        at.loc[list(zip(fitted["workload"], fitted["network"], fitted["scheme"])), c].to_numpy()
        for c in ("pred_low", "pred_high")
    )
    inside = (lo <= fitted["measured"].to_numpy()) & (fitted["measured"].to_numpy() <= hi)
    out = {"fitted_cells": len(fitted), "fitted_inside": float(inside.mean()) if len(fitted) else math.nan}
    if held is not None and len(held):
        k = list(zip(held["workload"], held["network"], held["scheme"]))
        rows = at.loc[k]
        rel_lo = (rows["pred_low"] / rows["throughput_median"]).to_numpy()
        rel_hi = (rows["pred_high"] / rows["throughput_median"]).to_numpy()
        p, m = held["predicted"].to_numpy(), held["measured"].to_numpy()
        out.update(held_cells=len(held), held_inside=float(((p * rel_lo <= m) & (m <= p * rel_hi)).mean()))
    width = (at["pred_high"] - at["pred_low"]) / at["throughput_median"]
    out["median_width"] = float(width.median())
    return out
