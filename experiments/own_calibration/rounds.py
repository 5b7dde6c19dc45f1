"""Rounds of one sweep pooled into one table per shape (issue 60). This machine's speed drifts over minutes: the same
1-worker cell on the same processor share took 0.52 s in one run and 0.70 s in the next (reports/own-calibration/
README.md). So `measure.sh` runs the 2-, 3- and 4-host sweeps in interleaved rounds (S2 S3 S4, S2-r2 S3-r2 S4-r2)
and the report reads, per host count, every round's cells pooled: each cell's iteration the median of its rounds'
medians, its spread the rounds' own spread and the spread between them. The difference between rounds is also
reported: it is the floor under any prediction's error on this machine (`round_spread`).

    pooled_sources([IN/S2, IN/S2-r2, IN/S3, IN/S3-r2])   # -> [table of S2's rounds, table of S3's rounds]
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from harness.predict.own_calibration import summary_of

CELL = [
    "workload",
    "scheme",
    "workers",
    "nodes",
    "workers_per_node",
    "servers",
    "server_hosts",
    "network",
    "batch_per_worker",
    "seq_len",
    "dtype",
    "device",
]
"""What makes two rows of two rounds the same cell."""
MEDIANS = ("iter_s_median", "throughput_median")
"""Pooled as the median of the rounds' (two rounds: their mean)."""
MEANS = ("forward_s", "forward_wait_s", "backward_s", "comm_wait_s", "optimizer_s", "throttled_periods", "throttled_s")
"""Pooled as the rounds' mean (the breakdown the report shows)."""


def sweep_name(path: Path) -> str:
    """The name in a run directory's sweep.yaml (the same for every round of one sweep file); its folder's name
    where it has none."""
    f = Path(path) / "sweep.yaml"
    try:
        name = (yaml.safe_load(f.read_text()) or {}).get("name") if f.is_file() else None
    except yaml.YAMLError:
        name = None
    return str(name or Path(path).name)


def grouped(paths) -> list[list[Path]]:
    """The run directories grouped by sweep (rounds of one sweep together), in the order first given."""
    groups: dict[str, list[Path]] = {}
    for p in paths:
        groups.setdefault(sweep_name(p), []).append(Path(p))
    return list(groups.values())


def pooled(paths: list[Path]) -> pd.DataFrame:
    """One table of the cells of several rounds of one sweep (the ok cells; a cell that ended ok in only some rounds
    pools those), with `rounds` the number pooled. Its attrs name it, as the first round with `+rN` (N rounds), and
    carry the first round's `shaped` and `cores` (harness/predict/own_calibration.summary_of)."""
    parts, shaped, cores = [], False, 0
    for i, p in enumerate(paths):
        _name, s, sh, c = summary_of(p)
        shaped, cores = shaped or sh, cores or c
        if "status" in s:
            s = s[s["status"] == "ok"]
        parts.append(s.assign(_round=i))
    d = pd.concat(parts, ignore_index=True)
    keys = [c for c in CELL if c in d]
    rows = []
    for _k, g in d.groupby(keys, dropna=False, sort=False):
        row = g.iloc[0].to_dict()
        for c in MEDIANS:
            if c in g:
                row[c] = float(g[c].median())
        for c in MEANS:
            if c in g:
                row[c] = float(pd.to_numeric(g[c], errors="coerce").mean())
        # within a round (each round's own spread) and between rounds (the drift), together
        within = float(np.sqrt(np.nanmean(np.square(pd.to_numeric(g["iter_s_std"], errors="coerce")))))
        between = float(g["iter_s_median"].std(ddof=1)) if len(g) > 1 else 0.0
        row["iter_s_std"] = math.sqrt((within if within == within else 0.0) ** 2 + between**2)
        row["rounds"] = len(g)
        row.pop("_round", None)
        rows.append(row)
    out = pd.DataFrame(rows)
    out.attrs.update(name=f"{paths[0]}+r{len(paths)}", shaped=shaped, cores=cores)
    return out


def pooled_sources(paths) -> list:
    """The sources for own_calibration.read_runs: a sweep given once as its run directory, a sweep given in several
    rounds as their pooled table (`pooled`)."""
    return [g[0] if len(g) == 1 else pooled(g) for g in grouped(paths)]


def round_spread(paths) -> pd.DataFrame:
    """Per cell of a sweep run in several rounds: how far its rounds' medians lie apart, relative to their mean
    (percent), with the sweep's host count; the cells of a sweep given once are left out."""
    rows = []
    for g in grouped(paths):
        if len(g) < 2:
            continue
        parts = []
        for i, p in enumerate(g):
            _name, s, _sh, _c = summary_of(p)
            if "status" in s:
                s = s[s["status"] == "ok"]
            parts.append(s.assign(_round=i))
        d = pd.concat(parts, ignore_index=True)
        keys = [c for c in CELL if c in d]
        for k, c in d.groupby(keys, dropna=False, sort=False):
            if len(c) < 2:
                continue
            x = c["iter_s_median"].astype(float)
            cell = dict(zip(keys, k))
            nodes = c["nodes"].iloc[0] if "nodes" in c else math.nan
            rows.append(
                {
                    "sweep": sweep_name(g[0]),
                    "hosts": int(nodes) if nodes == nodes else 1,
                    "workload": cell["workload"],
                    "scheme": cell["scheme"],
                    "network": cell["network"],
                    "workers": int(cell["workers"]),
                    "rounds": len(x),
                    "spread_pct": float(100 * (x.max() - x.min()) / x.mean()),
                }
            )
    return pd.DataFrame(rows)
