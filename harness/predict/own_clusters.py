"""Networks that run ddlbench's own stacks, as clusters (harness/predict/clusters.ClusterEntry; docs/ARCHITECTURE.md,
"Predictor"): the link presets and measured commbench networks `ddlbench predict` is given, and the networks a
two-node run of the user's fitted. Their door to a calibration is ddlbench's own stacks'
(harness/predict/own_calibration.calibrate_stacks): a calibration enters their rows through the networks' stacks,
the PS methods' knobs and, for the fitted networks, the layout the run had.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import pandas as pd

from harness.predict.clusters import ClusterEntry
from harness.predict.own_calibration import OwnCalibration, calibrate_stacks
from harness.predict.predictor import Network, predict_rows


def _any_size(nodes: int) -> None:
    return None


def networks_cluster(
    networks: Callable[[], list[Network]], per_node: list[int], servers: int, allreduce: str, server_hosts: str
) -> ClusterEntry:
    """The networks `networks()` builds (link presets, measured commbench networks: read when predicted), each with
    nodes of `per_node` workers, on ddlbench's own stacks (or on the stacks a calibration fitted)."""

    def curve(models, node_counts, methods, knobs, calibration: OwnCalibration | None = None) -> pd.DataFrame:
        nets = networks()
        if calibration is not None:
            fitted = calibration.stacks()
            nets = [replace(n, stacks=fitted) for n in nets]
            knobs = calibration.calibrated_knobs(methods, knobs)
        return predict_rows(
            models, nets, list(node_counts), per_node, methods, servers, allreduce, knobs, server_hosts=server_hosts
        )

    return ClusterEntry(
        summary="link presets and measured networks on ddlbench's own stacks",
        gpus_per_node=per_node[0],
        check_nodes=_any_size,
        curve=curve,
        calibrate=calibrate_stacks,
    )


def fitted_clusters(
    cal: OwnCalibration, per_node: list[int] | None, servers: int, allreduce: str, server_hosts: str
) -> dict[str, ClusterEntry]:
    """Each network the calibration fitted (or a two-node commbench measured), on its layout (servers and where they
    sit) unless the request says otherwise (`servers` > 0 or `server_hosts` not the default, dedicated), with nodes
    of `per_node` workers (None: the run's); a server sharing the run's machine gets less of a core as ranks are
    added (harness/predict/own_calibration.Group.server_share)."""
    defaults = servers == 0 and server_hosts == "dedicated"

    def entry(label: str) -> ClusterEntry:
        g = cal.layout(label)
        n_servers = g.servers if defaults else servers

        def curve(models, node_counts, methods, knobs, calibration: OwnCalibration | None = None) -> pd.DataFrame:
            frames, network = [], cal.network(label)
            for n in node_counts:
                share = g.server_share(n, n_servers or n)
                frames.append(
                    predict_rows(
                        models,
                        [network],
                        [n],
                        per_node if per_node is not None else g.per_node,
                        methods,
                        n_servers,
                        allreduce,
                        cal.calibrated_knobs(methods, knobs, share=share),
                        run_id="calibrated",
                        server_hosts=(g.server_hosts if defaults and g.servers else server_hosts),
                    )
                )
            return pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]

        return ClusterEntry(
            summary=f"{label} as the calibration fitted it",
            gpus_per_node=per_node[0] if per_node is not None else g.per_node,
            check_nodes=_any_size,
            curve=curve,
            calibrate=calibrate_stacks,
        )

    return {label: entry(label) for label in cal.networks}
