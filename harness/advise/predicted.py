"""Predicted iteration time of every `advise` candidate: the discrete-event model (harness/predict/) fed
with a per-layer profile measured here and the network measured here (commbench) or a cited preset.
Returns a table, one row per candidate, best predicted first; no process, no file.
"""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd

from harness.advise.candidates import Candidate, Layout
from harness.core.errors import UserError
from harness.predict.commbench_fit import links_from_commbench, testbed_burst_bytes
from harness.predict.predictor import Network, predict_rows
from harness.sim.links import Cluster, get_link
from harness.sim.model import ComputeModel
from harness.sim.ps import SERVER_GBYTE_S

PREDICTED_COLUMNS = [
    "rank",
    "label",
    "scheme",
    "backend",
    "servers",
    "server_hosts",
    "knobs_json",
    "pred_iter_s",
    "pred_throughput",
    "pred_compute_s",
    "pred_exposed_comm_s",
    "pred_comm_only_s",
    "pred_overlap_ratio",
    "comm_bytes_per_iter",
]


def measured_network(commbench: pd.DataFrame, layout: Layout, shaped: bool, label: str) -> Network:
    """The network from commbench rows measured on this layout (all-reduce at its worker count; push-pull
    with one server placed as `layout` places it, for the parameter-server link). `shaped`: the testbed's
    token buckets (docs/ARCHITECTURE.md, "Predictor")."""
    if commbench.empty or not (commbench["collective"] == "allreduce").any():
        raise UserError(
            "the commbench table has no all-reduce rows: measure `ddlbench commbench --workers N` "
            "(or let advise measure it: drop --commbench)"
        )
    pp_hosts = "dedicated" if layout.spare_hosts else "colocated"
    any_link = get_link("eth-10g")  # unused: only the layout matters for the push-pull fit
    ps_layout = Cluster(layout.nodes, layout.workers_per_node, any_link, any_link, 1, server_hosts=pp_hosts)
    link, p2p, fits = links_from_commbench(
        commbench, testbed_burst_bytes() if shaped else 0.0, ps_layout, SERVER_GBYTE_S
    )
    return Network(label, link, link, fits, p2p)


def preset_network(name: str, intra: str = "pcie3-x16") -> Network:
    """A cited network preset (`ddlbench predict --network`), for an allocation where nothing was measured."""
    return Network(name, get_link(name), get_link(intra))


def predict_candidates(
    cands: list[Candidate], model: ComputeModel, net: Network, layout: Layout, extra: Callable | None = None
) -> pd.DataFrame:
    """One row per candidate (PREDICTED_COLUMNS), best predicted throughput first, `rank` from 1. extra: candidate
    -> {method: model knobs} beside the candidate's own (a calibration's, e.g. the servers' summing rate)."""
    rows = []
    for c in cands:
        df = predict_rows(
            [model],
            [net],
            [layout.nodes],
            [layout.workers_per_node],
            [c.scheme],
            servers=c.servers,
            knobs={c.scheme: {**(extra(c) if extra else {}).get(c.scheme, {}), **dict(c.knobs)}},
            server_hosts=c.server_hosts if c.servers else "dedicated",
        )
        r = df.iloc[0]
        rows.append(
            {
                "label": c.label,
                "scheme": c.scheme,
                "backend": c.backend,
                "servers": c.servers,
                "server_hosts": c.server_hosts,
                "knobs_json": c.knobs_json,
                "pred_iter_s": float(r["iter_s_median"]),
                "pred_throughput": float(r["throughput_median"]),
                "pred_compute_s": float(r["compute_only_iter_s"]),
                "pred_exposed_comm_s": float(r["exposed_comm_s"]),
                "pred_comm_only_s": float(r["comm_only_s"]),
                "pred_overlap_ratio": float(r["overlap_ratio"]),
                "comm_bytes_per_iter": float(r["comm_bytes_per_iter"]),
            }
        )
    out = pd.DataFrame(rows, columns=[c for c in PREDICTED_COLUMNS if c != "rank"])
    out = out.sort_values(["pred_iter_s", "label"], kind="stable").reset_index(drop=True)
    out.insert(0, "rank", range(1, len(out) + 1))
    return out
