"""An outside check of the scaling (issue 61, item 4): scaling that BytePS (OSDI'20) and ByteScheduler (SOSP'19)
published for 8 to 256 GPUs (published_scaling.csv, provenance in this folder's README), predicted by the study's
model where the setup can be stated (published_setups.csv: the harness's workload and method, the single-GPU
throughput and where it comes from, and every substitution for what the model does not have).

    from experiments.study_prediction.published import published_check, published_table_md
    print(published_table_md(published_check()))

The machine is the study's cluster (harness/study/cluster.py) with the study's nominal inputs
(harness/study/inputs.py), changed only where a published setup says otherwise: 8 GPUs per machine, NVLink inside
it where stated, its own GPU count. Pure but for reading the two CSV files beside this module.
"""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd

from harness.predict.compute import compute_model
from harness.predict.predictor import Network, predict_rows
from harness.predict.profiler import counted_profile
from harness.sim.links import LINKS
from harness.sim.model import ComputeModel
from harness.study import cluster as study_cluster
from harness.study.inputs import INPUTS

HERE = Path(__file__).parent
PUBLISHED = HERE / "published_scaling.csv"
"""What the sources state or show, one row per number (README.md, "Published scaling")."""
SETUPS = HERE / "published_setups.csv"
"""The published rows the model predicts: its workload, method, compute and substitutions, by the row's id."""
FAMILY = "ib-100g"
"""Every predicted setup runs on 100 Gb/s RDMA (InfiniBand or RoCE): the study's EDR verbs (inputs ib_*)."""
GPUS_PER_NODE = 8
"""Every published machine holds 8 V100s (published_scaling.csv, gpus_per_node)."""
TWO_NODE_PARAMS = HERE.parents[1] / "reports" / "study-prediction" / "two-node-params.parquet"
"""The study's transports as its report fitted them to the two-node table (this folder's run.py with --two-node;
harness/study/two_node.py), on top of the one-node fit."""
FITTED_BLOCKS = ("NCCL over IB", "BytePS over RDMA")
"""The fitted blocks that carry to a 100 Gb/s RDMA setup: the wire as NCCL and BytePS 0.2 saw it, BytePS's server
and signalling costs. The one-node blocks stay nominal: they fit the study's GeForce cards and their PCIe node."""


def read_published(path: Path = PUBLISHED) -> pd.DataFrame:
    return pd.read_csv(path, dtype={"gpus": str, "gpus_per_node": str, "network_gbit_s": str})


def read_setups(path: Path = SETUPS) -> pd.DataFrame:
    return pd.read_csv(path, dtype={"seq_len": "Int64"})


def fitted_values(path: Path = TWO_NODE_PARAMS) -> dict:
    """Input name -> value of the report's two-node fit, its FITTED_BLOCKS only; empty when it has not run."""
    if not path.exists():
        return {}
    t = pd.read_parquet(path)
    return {r.parameter: float(r.value) for r in t.itertuples() if r.block in FITTED_BLOCKS}


def machine_values(intra: str, fitted: dict | None = None) -> dict:
    """The study's nominal inputs, with `fitted` over them, for a machine whose GPUs talk over `intra`:
    `study-pcie` keeps the study's PCIe node (no peer-to-peer, through host memory); `nvlink2` puts NVLink 2.0 on
    NCCL's and BytePS's intra-node edges and takes the host path away (harness/sim/links.LINKS["nvlink2"]:
    150 GB/s per GPU)."""
    v = {**INPUTS.nominal(), **(fitted or {})}
    if intra == "study-pcie":
        return v
    if intra != "nvlink2":
        raise ValueError(f"unknown intra-node link {intra!r}: study-pcie or nvlink2")
    nv = LINKS["nvlink2"]
    edge = nv.bytes_per_s / 1e9
    return {
        **v,
        "shm_edge_gbyte_s": edge,
        "byteps_nccl_edge_gbyte_s": edge,
        "host_path_gbyte_s": math.inf,
        "nccl_hop_s": nv.latency_s,
    }


def network(values: dict, nodes: int, g: int = GPUS_PER_NODE) -> tuple[Network, dict]:
    """The study's RDMA network at `nodes` x `g` GPUs for these input values, and the PS methods' knobs
    (harness/study/cluster.network and ps_knobs: any size; `study_network` also sets MG-WFBP's, whose table has
    the study's sizes only)."""
    return study_cluster.network(values, FAMILY, nodes, g), study_cluster.ps_knobs(values)


def setup_compute(s) -> ComputeModel:
    """One GPU as the setup states it: the harness's FLOP-counted workload at its batch and sequence length,
    calibrated to the stated single-GPU throughput; `grad_scale` scales the gradients' bytes (fp16: 0.5)."""
    seq = None if pd.isna(s.seq_len) else int(s.seq_len)
    table = counted_profile(s.workload, int(s.batch), seq)
    m = compute_model(table, "v100", throughput=float(s.per_gpu_samples_s), batch=int(s.batch), mode="flops")
    if s.grad_scale != 1.0:
        m = replace(m, grad_bytes=tuple(round(b * s.grad_scale) for b in m.grad_bytes))
    return m


COMPUTE_SPREAD = (0.5, 2.0)
"""One GPU's iteration halved and doubled beside the stated one: what a wrong single-GPU throughput, batch or
sequence length (not stated by most sources) would move."""


def predicted_efficiency(
    m, method: str, gpus: int, base_gpus: int, intra: str, fitted: dict | None = None, g: int = GPUS_PER_NODE
) -> float:
    """Throughput at `gpus` over (gpus / base_gpus) x throughput at `base_gpus` (1: the single GPU)."""
    values = machine_values(intra, fitted)

    def throughput(n_gpus: int) -> tuple[float, float]:
        """(throughput at n_gpus, one GPU's throughput) in samples/s."""
        nodes = max(1, n_gpus // g)
        net, knobs = network(values, nodes, min(g, n_gpus))
        rows = predict_rows([m], [net], [nodes], min(g, n_gpus), [method], servers=nodes, knobs=knobs)
        return float(rows["throughput_median"].iloc[0]), float(rows["baseline_throughput"].iloc[0])

    x, x1 = throughput(gpus)
    base = x1 if base_gpus == 1 else throughput(base_gpus)[0]
    return x / (gpus / base_gpus * base)


def published_efficiency(pub: pd.DataFrame, row, base_gpus: int) -> float:
    """The published row as a scaling efficiency: as stated, or its throughput over the same method's bar at
    `base_gpus` scaled linearly (the figure's own linear-scaling bar)."""
    if row.metric == "scaling efficiency":
        return float(row.value)
    base_id = row.id.rsplit("-", 1)[0] + f"-{base_gpus}"
    base = pub.set_index("id").loc[base_id]
    return float(row.value) / (int(row.gpus) / base_gpus * float(base.value))


def published_check(
    ids: list[str] | None = None, published: Path = PUBLISHED, setups: Path = SETUPS, fitted: Path = TWO_NODE_PARAMS
) -> pd.DataFrame:
    """Every published row with a setup (or those of `ids`): published and predicted scaling efficiency (nominal
    inputs), the error (predicted - published, as a fraction), the prediction with one GPU's iteration halved
    and doubled (COMPUTE_SPREAD), with the study's fitted RDMA transports (`predicted_fitted`, NaN without the
    report's fit), the stated setup and the substitutions."""
    pub, st = read_published(published), read_setups(setups)
    fit = fitted_values(fitted)
    if ids is not None:
        st = st[st["id"].isin(ids)]
    by_id = pub.set_index("id", drop=False)
    models: dict = {}
    out = []
    for s in st.itertuples():
        row = by_id.loc[s.id]
        key = (s.workload, s.batch, s.seq_len, s.per_gpu_samples_s, s.grad_scale)
        if key not in models:
            models[key] = setup_compute(s)
        gpus = int(row.gpus)
        m, base = models[key], int(s.base_gpus)
        pred = predicted_efficiency(m, s.method, gpus, base, s.intra)
        low, high = (predicted_efficiency(m.scaled(f), s.method, gpus, base, s.intra) for f in COMPUTE_SPREAD)
        with_fit = predicted_efficiency(m, s.method, gpus, base, s.intra, fit) if fit else math.nan
        published_eff = published_efficiency(pub, row, int(s.base_gpus))
        out.append(
            {
                "id": s.id,
                "system": row.system,
                "model": row.model,
                "method": row.method,
                "gpus": gpus,
                "efficiency_base_gpus": int(s.base_gpus),
                "published": published_eff,
                "predicted": pred,
                "error": pred - published_eff,
                "predicted_compute_half": low,
                "predicted_compute_double": high,
                "predicted_fitted": with_fit,
                "setup": f"{row.gpu}, {row.gpus_per_node} per machine, {gpus} GPUs, {row.network} "
                f"{row.network_gbit_s} Gb/s, {row.architecture}, {row.precision}; harness {s.workload} batch "
                f"{s.batch}" + (f" seq {s.seq_len}" if not pd.isna(s.seq_len) else "") + f", method {s.method}",
                "per_gpu_samples_s": float(s.per_gpu_samples_s),
                "per_gpu_source": s.per_gpu_source,
                "substitutions": s.substitutions,
                "source": f"{row.source}; {row.where}",
                "read": row.read,
            }
        )
    return pd.DataFrame(out)


def unpredicted(published: Path = PUBLISHED, setups: Path = SETUPS) -> pd.DataFrame:
    """The published rows the model does not predict, with why (a model the harness lacks, a GPU count only in
    an image, a maximum over setups not named, no base to take an efficiency over, or the 8-GPU base a figure's
    efficiency is taken over)."""
    pub, st = read_published(published), read_setups(setups)
    rest = pub[~pub["id"].isin(st["id"])].copy()
    known = {"ResNet-50", "BERT-Large", "BERT-Base"}

    def why(r) -> str:
        if r.metric == "max speedup over baseline":
            return "a maximum over setups the source does not name"
        if r.model not in known:
            return f"the harness has no {r.model}"
        if not str(r.gpus).isdigit():
            return "the GPU count is only in a chart that is not in the repository"
        if r.gpus == str(GPUS_PER_NODE) and r.metric == "throughput":
            return "the base of the efficiency (one machine)"
        return "no single-GPU or one-machine throughput to take an efficiency over"

    rest["why_not"] = [why(r) for r in rest.itertuples()]
    return rest[["id", "system", "model", "gpus", "metric", "value", "why_not"]]


def published_table_md(df: pd.DataFrame) -> str:
    """The check as Markdown: one row per prediction, then the substitutions once per distinct text."""
    lines = [
        "| system | model | method | GPUs | efficiency over | published | predicted | error (points) | "
        "compute x0.5 / x2 | fitted RDMA |",
        "|---|---|---|---:|---:|---:|---:|---:|---|---:|",
    ]
    for r in df.itertuples():
        base = "1 GPU" if r.efficiency_base_gpus == 1 else f"{r.efficiency_base_gpus} GPUs"
        lines.append(
            f"| {r.system} | {r.model} | {r.method} | {r.gpus} | {base} | {r.published:.1%} | {r.predicted:.1%} | "
            f"{100 * r.error:+.1f} | {r.predicted_compute_half:.1%} / {r.predicted_compute_double:.1%} | "
            f"{r.predicted_fitted:.1%} |"
        )
    mae = float(np.mean(np.abs(df["error"]))) if len(df) else math.nan
    lines += ["", f"Mean absolute error: {100 * mae:.1f} efficiency points over {len(df)} rows.", ""]
    for text in dict.fromkeys(df["substitutions"]):
        if not text.startswith("as "):
            lines.append(f"- {text}")
    return "\n".join(lines)
