"""The study's software costs calibrated from one node (docs/ARCHITECTURE.md, "Calibration"): the methods' 4-GPU
throughputs on one node of the study's cluster fix a few named physical parameters of its stacks, and the
calibrated inputs then predict every size (harness/study/curve.py).

Why one node: the costs of the 2019 stacks (ByteScheduler's Python plugin, BytePS's in-node pipeline, NCCL's
path through host memory, a GPU shared by communication and compute) are uncertain by factors when derived from
code alone, and they already show inside one node, which is what a user has before asking what a cluster would
do. The parameters, each a quantity of one stack shared across workloads (a workload enters only through its
layer profile), in three blocks, each fitted to the cells that move it:

- all-reduce (BSP-A2A, WFBP-A2A, MG-WFBP): NCCL's ring edge through host memory (`shm_edge_gbyte_s`) and the
  node's host path (`host_path_gbyte_s`); the optimizer's Python per torch op (`py_op_s`) and the device's
  rate for its memory passes and the merge copies (`d2d_gbyte_s`); how much compute and communication slow
  each other on a GPU they share (`overlap_compute_slowdown`, `overlap_comm_slowdown`);
- BytePS (BSP-PS, WFBP-PS, ByteScheduler-PS): its in-node NCCL reduce-scatter and all-gather per partition
  (`byteps_nccl_edge_gbyte_s`). One node of BytePS runs no server (global.cc: a job is distributed only with
  more than one worker node), so its transports' rates (TCP on 10 GbE and IPoIB, RDMA) leave no trace in one
  node's cells: they keep their sourced ranges;
- ByteScheduler on Horovod: its scheduler's host time per partition (`bs_partition_cpu_s`), the share of GIL
  hand-offs its spinning poller wins (`gil_convoy_share`) and the host gap between forward layers under its
  pre-forward hooks (`bs_fwd_gap_s`).

Which optimizer the study's single-GPU BERT figure ran (`calib_adam_share`: 0 = SGD, 1 = Adam) is chosen, not
fitted: the all-reduce block is fitted both ways and the better fit kept (model selection, reported).

A table has the columns of the study's one-node table (workload, batch, network, scheme, gpus, throughput, std):
gpus = 1 rows give each workload's single-GPU throughput (`scheme` single-gpu), gpus = 4 rows the methods. A
run directory of the harness gives the same from its summary (workers 1 and 4; std from the iterations' spread).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import tomllib

from harness.core.errors import UserError
from harness.predict.calibration import Bounded, FittedCells, OfItsCluster, leave_one_workload_out
from harness.predict.compute import compute_model
from harness.predict.fitting import Block, Cells, Fit, Param, fit_params
from harness.predict.predictor import SEVEN_METHODS, predict_rows
from harness.predict.profiler import counted_profile
from harness.study.cluster import GPUS_PER_NODE, study_network
from harness.study.curve import WORKLOADS, study_compute
from harness.study.inputs import INPUTS, StudyValues

COLUMNS = ["workload", "batch", "network", "scheme", "gpus", "throughput", "std"]
"""The one-node table's columns (the study's, `harness/study/one_node.csv`)."""
STUDY_TABLE = Path(__file__).with_name("one_node.csv")
"""The study's one-node column (Shi et al., arXiv 2005.13247, results of 2020-05-29): 1 GPU and 4 GPUs in one node."""
SINGLE = "single-gpu"


@dataclass(frozen=True)
class StudyBlock:
    """One block of the study's calibrations as harness/study/calibration.toml states it: the inputs it fits with
    their search bounds, the methods whose cells fix them, and (two nodes) the network those cells ran on."""

    name: str
    methods: tuple[str, ...]
    params: tuple[Param, ...]
    network: str | None = None
    scan: int = 0
    """Latin-hypercube points scanned before the search (a rugged cost); 0: none."""


BLOCK_KEYS = {"methods", "search", "held", "scan", "network"}
BLOCKS_FILE = Path(__file__).with_name("calibration.toml")
"""The study's calibrations as data (shipped with the package: pyproject.toml, package-data)."""


def read_blocks(path: Path = BLOCKS_FILE) -> dict[str, dict[str, StudyBlock]]:
    """{"one-node": {block: StudyBlock}, "two-node": {...}} in the file's order, each parameter an input of the
    study's cluster (INPUTS) with the bounds the file gives it; a file that breaks the shape raises ValueError."""
    doc = tomllib.loads(path.read_text())
    out = {}
    for section, blocks in doc.items():
        out[section] = {}
        for name, t in blocks.items():
            unknown = set(t) - BLOCK_KEYS
            if unknown or not {"methods", "search"} <= set(t):
                raise ValueError(f"{path}: [{section}.{name}] holds methods, search (and held, scan, network)")
            held = set(t.get("held", ()))
            params = tuple(
                Bounded(INPUTS[p], (float(lo), float(hi))).param(search=p not in held)
                for p, (lo, hi) in t["search"].items()
            )
            out[section][name] = StudyBlock(name, tuple(t["methods"]), params, t.get("network"), int(t.get("scan", 0)))
    return out


BLOCKS = read_blocks()
"""The study's calibration blocks (harness/study/calibration.toml)."""
PARAMS = {name: b.params for name, b in BLOCKS["one-node"].items()}
"""The one-node blocks' parameters, each within its search bounds."""
SEARCH_BOUNDS = {p.name: (p.low, p.high) for params in PARAMS.values() for p in params}
"""input -> (low, high) the one-node fit searches within."""
ALLREDUCE = BLOCKS["one-node"]["all-reduce"].methods
BYTEPS = BLOCKS["one-node"]["BytePS"].methods
PLUGIN = BLOCKS["one-node"]["ByteScheduler"].methods
HOST_PATH_START = SEARCH_BOUNDS["host_path_gbyte_s"][1]
"""The host path's start (the top of its search range): one node's cells cannot tell a host path that binds from
NCCL's edge (fit_table)."""
BLOCK_METHODS = {name: b.methods for name, b in BLOCKS["one-node"].items()}
"""Which methods' cells fix each block's parameters."""


def read_one_node(path: str | Path) -> pd.DataFrame:
    """The one-node table at `path` (CSV or Parquet with COLUMNS, or a run directory's summary), checked."""
    p = Path(path)
    if p.is_dir():
        f = p / "summary.parquet"
        if not f.exists():
            raise UserError(
                f"--calibrate {p}: no summary.parquet there; give a run directory of ddlbench or a "
                f"table with columns {', '.join(COLUMNS)}"
            )
        df = _from_summary(pd.read_parquet(f))
    elif p.suffix == ".parquet" and p.exists():
        df = pd.read_parquet(p)
    elif p.suffix == ".csv" and p.exists():
        df = pd.read_csv(p)
    else:
        raise UserError(
            f"--calibrate {p}: not a run directory, nor a .csv or .parquet table; give one (the "
            f"study's is {STUDY_TABLE.name})"
        )
    missing = [c for c in COLUMNS if c not in df.columns]
    if missing:
        raise UserError(
            f"--calibrate {p}: the table lacks column(s) {', '.join(missing)}; it needs "
            f"{', '.join(COLUMNS)} as the study's one-node table has"
        )
    df = df[COLUMNS].copy()
    df["std"] = df["std"].fillna(0.0)
    bad = df[~(df["throughput"] > 0)]
    if len(bad):
        raise UserError(
            f"--calibrate {p}: {len(bad)} row(s) without a throughput > 0 (first: "
            f"{bad.iloc[0]['workload']} {bad.iloc[0]['scheme']}); drop them or measure them again"
        )
    return df


def _from_summary(s: pd.DataFrame) -> pd.DataFrame:
    s = s[s["status"] == "ok"]
    rel = (s["iter_s_std"] / s["iter_s_median"]).fillna(0.0)
    return pd.DataFrame(
        {
            "workload": s["workload"],
            "batch": s["batch_per_worker"],
            "network": s["network"],
            "scheme": np.where(s["workers"] == 1, SINGLE, s["scheme"]),
            "gpus": s["workers"],
            "throughput": s["throughput_median"],
            "std": s["throughput_median"] * rel,
        }
    )


def check_table(df: pd.DataFrame, source: str = "the table") -> list[str]:
    """The workloads the table can calibrate, or a one-line error naming what is missing and why."""
    have = set(df["workload"])
    missing = [w for w in WORKLOADS if w not in have]
    if missing:
        raise UserError(
            f"--calibrate {source}: no rows of {', '.join(missing)}; the calibration fits parameters "
            f"shared by the study's workloads ({', '.join(WORKLOADS)}) and checks them by leaving each "
            f"out: add that workload's one-node cells"
        )
    workloads = list(WORKLOADS)
    for w in workloads:
        if not ((df["workload"] == w) & (df["gpus"] == 1)).any():
            raise UserError(
                f"--calibrate {source}: {w} has no 1-GPU row (scheme {SINGLE}); its compute is "
                f"calibrated from it: add it"
            )
    four = df[df["gpus"] == GPUS_PER_NODE]
    for block, methods in BLOCK_METHODS.items():
        for m in methods:
            if not (four["scheme"] == m).any():
                names = ", ".join(p.name for p in PARAMS[block])
                raise UserError(
                    f"--calibrate {source}: no {GPUS_PER_NODE}-GPU rows of {m}; the {block} parameters "
                    f"({names}) rest on them: add that method's one-node cells"
                )
    return workloads


def calibration_models(df: pd.DataFrame, workloads: list[str], profiles: Path | dict | None = None) -> list:
    """Each workload's compute model (its measured layer profile where `profiles`, a directory of
    profile-<workload>.parquet or a dict workload -> table, has one, else FLOP counts), calibrated to the
    table's single-GPU throughput at the table's batch."""
    out = []
    for w in workloads:
        row = df[(df["workload"] == w) & (df["gpus"] == 1)].iloc[0]
        if isinstance(profiles, dict):
            table = profiles.get(w)
        else:
            f = profiles / f"profile-{w}.parquet" if profiles else None
            table = pd.read_parquet(f) if f is not None and f.exists() else None
        mode = "flops" if table is None or table["forward_s"].isna().all() else "profile"
        table = counted_profile(w) if table is None else table
        out.append(
            compute_model(table, "study-gpu", throughput=float(row["throughput"]), batch=int(row["batch"]), mode=mode)
        )
    return out


class OneNode:
    """The study's one node for a set of input values: every asked cell's predicted throughput. One node's
    cells do not depend on the network between nodes (no traffic leaves it; BytePS runs no server), so each
    method is simulated once and its figure stands for every network column."""

    def __init__(self, models: list):
        self.models = {m.workload: m for m in models}

    def __call__(self, v: dict, keys) -> dict:
        workloads = sorted({k[0] for k in keys})
        methods = [m for m in SEVEN_METHODS if m in {k[2] for k in keys}]
        v = StudyValues.of(v)
        scaled = [study_compute(self.models[w], v).scaled(v.compute.compute_scale) for w in workloads]
        sn = study_network(v, "ib-100g", 1)
        df = predict_rows(
            scaled,
            [sn.network],
            [1],
            GPUS_PER_NODE,
            methods,
            servers=1,
            knobs=sn.knobs,
            run_id="calibration",
            server_hosts="dedicated",
        )
        # the columns read, not itertuples: a tuple of all ~90 columns per row was 4% of a fit
        x = dict(zip(zip(df["workload"], df["scheme"]), df["throughput_median"]))
        return {k: x.get((k[0], k[2]), math.nan) for k in keys}


@dataclass
class Calibration(OfItsCluster, FittedCells):
    fit: Fit
    adam_share: float
    """The single-GPU BERT optimizer chosen (0 SGD, 1 Adam)."""
    selection: dict
    """calib_adam_share -> the all-reduce block's cost (sum of squared residuals) with it."""
    cells: pd.DataFrame
    """The fitted cells: measured, std, predicted, error."""
    lowo: pd.DataFrame | None
    """Leave-one-workload-out: each workload's cells predicted by a fit to the others."""
    source: str


def fitted_cells(fit: Fit, cells: Cells) -> pd.DataFrame:
    """One row per fitted cell: workload, network, scheme, measured, std, predicted (at the fit), error."""
    out = pd.DataFrame(
        [
            {
                "workload": k[0],
                "network": k[1],
                "scheme": k[2],
                "measured": cells.mean[k],
                "std": cells.std[k],
                "predicted": fit.predicted.get(k, math.nan),
            }
            for k in cells.mean
        ]
    )
    out["error"] = out["predicted"] / out["measured"] - 1
    return out


def table_cells(rows: pd.DataFrame) -> Cells:
    """The rows of a table with the study's columns as cells to fit: (workload, network, scheme) -> throughput, std."""
    mean = {(r.workload, r.network, r.scheme): float(r.throughput) for r in rows.itertuples()}
    std = {(r.workload, r.network, r.scheme): float(r.std) for r in rows.itertuples()}
    return Cells(mean, std)


def _cells(df: pd.DataFrame, workloads: list[str]) -> Cells:
    return table_cells(
        df[(df["gpus"] == GPUS_PER_NODE) & df["workload"].isin(workloads) & df["scheme"].isin(SEVEN_METHODS)]
    )


def _blocks(cells: Cells) -> list[Block]:
    return [
        Block(b, PARAMS[b], tuple(k for k in cells.mean if k[2] in BLOCK_METHODS[b]), SCAN.get(b, 0)) for b in PARAMS
    ]


SCAN = {name: b.scan for name, b in BLOCKS["one-node"].items() if b.scan}
"""Blocks whose cost is rugged (the GIL's hand-offs are won or lost whole): a Latin-hypercube scan first."""


def fit_table(
    df: pd.DataFrame, workloads: list[str], models: list, starts: int = 2, adam_shares=(0.0, 1.0), polish: bool = False
) -> tuple[Fit, float, dict]:
    """The fit to these workloads' cells, with the single-GPU optimizer that fits the all-reduce block best.
    The blocks are fitted in turn without a joint polish by default: the all-reduce cells depend on the
    all-reduce parameters only, BytePS's on those and its own, ByteScheduler's likewise, so each block's
    parameters come from its own methods' cells."""
    predict = OneNode([m for m in models if m.workload in workloads])
    cells = _cells(df, workloads)
    blocks = _blocks(cells)
    nominal = INPUTS.nominal()
    # one node sees its ring edge as min(NCCL's edge, host path / GPUs): the edge alone can say it, so the host
    # path starts where it does not bind and keeps what the cells allow of its sourced range (a lower bound)
    start = {**nominal, "host_path_gbyte_s": HOST_PATH_START}
    costs, first = {}, {}
    for share in adam_shares:
        first[share] = fit_params(
            blocks[:1], predict, cells, {**start, "calib_adam_share": share}, starts=starts, polish=False
        )
        costs[share] = float(np.sum(first[share].residuals ** 2))
    share = min(costs, key=costs.get)
    fit = fit_params(blocks, predict, cells, first[share].values, starts=starts, polish=polish, skip=1)
    fit.evaluations += sum(f.evaluations for f in first.values())
    fit.message = f"{first[share].message}; {fit.message}"
    fit.converged = fit.converged and first[share].converged
    return fit, share, costs


def _held_out(df: pd.DataFrame, workloads: list[str], models: list, held: str, starts: int) -> pd.DataFrame:
    """One leave-one-workload-out fold: the other workloads' fit, the held-out workload's cells predicted."""
    fit, _, _ = fit_table(df, [w for w in workloads if w != held], models, starts=starts)
    cells = _cells(df, [held])
    got = OneNode([m for m in models if m.workload == held])(fit.values, list(cells.mean))
    return held_out_rows(held, cells, got)


def held_out_rows(held: str, cells: Cells, got: dict) -> pd.DataFrame:
    """A fold's table: each held-out cell (workload, network, scheme) measured and predicted."""
    return pd.DataFrame(
        [
            {
                "held_out": held,
                "workload": k[0],
                "network": k[1],
                "scheme": k[2],
                "measured": cells.mean[k],
                "predicted": got[k],
            }
            for k in cells.mean
        ]
    )


def calibrate(
    table: str | Path | pd.DataFrame,
    profiles: Path | dict | None = None,
    lowo: bool = True,
    starts: int = 3,
    processes: int | None = None,
) -> Calibration:
    """Fit the study stacks' parameters to a one-node table (a path or a frame with COLUMNS); with `lowo`, also
    fit on each pair of workloads and predict the third's cells."""
    source = str(table) if not isinstance(table, pd.DataFrame) else "the table"
    df = read_one_node(table) if not isinstance(table, pd.DataFrame) else table
    workloads = check_table(df, source)
    models = calibration_models(df, workloads, profiles)

    def whole():
        return fit_table(df, workloads, models, starts=starts)

    def fold(held: str) -> pd.DataFrame:
        return _held_out(df, workloads, models, held, starts)

    (fit, share, costs), out = leave_one_workload_out(workloads, fold, whole, processes) if lowo else (whole(), None)
    fitted = fitted_cells(fit, _cells(df, workloads))
    return Calibration(fit, share, costs, fitted, out, source)


def lowo_summary(lowo: pd.DataFrame) -> pd.DataFrame:
    """Per method: the median and largest absolute leave-one-workload-out error, and per held-out workload."""
    t = lowo.assign(abs_error=lowo["error"].abs())
    per = t.pivot_table(index="scheme", columns="held_out", values="error", aggfunc="median")
    per["median_abs"] = t.groupby("scheme")["abs_error"].median()
    per["max_abs"] = t.groupby("scheme")["abs_error"].max()
    return per.reindex([m for m in SEVEN_METHODS if m in per.index])
