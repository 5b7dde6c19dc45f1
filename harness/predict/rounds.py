"""Runs of one sweep file measured in rounds, read as one run (docs/ARCHITECTURE.md, "Calibration"; issue 60). A
cell on a CFS-throttled host moved by up to a fifth between two rounds of the same sweep, measured minutes apart
(reports/own-calibration/README.md), so `experiments/own_calibration/measure.sh` runs each sweep in interleaved rounds
and `predict --calibrate RUN --calibrate RUN-r2` reads them pooled: each cell's iteration the median of its rounds'
medians, its spread the rounds' own spread and the spread between them. Rounds are runs whose sweep files are the
same (`sweep_key`). How far the rounds lie apart (`round_spread`) is the floor under any check of a prediction.

    pooled_sources([IN/S2, IN/S2-r2, IN/S3, IN/S3-r2])   # -> [table of S2's rounds, table of S3's rounds]
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from harness.core.errors import UserError

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


def summary_of(source) -> tuple[str, pd.DataFrame, bool, int]:
    """(name, summary, shaped, cores) of a run directory (shaped: swept on the testbed; cores: its machine's, from
    its environment, 0 where not recorded) or a summary table (its attrs say them)."""
    if isinstance(source, pd.DataFrame):
        a = source.attrs
        return str(a.get("name", "the table")), source, bool(a.get("shaped", False)), int(a.get("cores", 0))
    p = Path(source)
    f = p / "summary.parquet" if p.is_dir() else p
    if not f.is_file() or f.suffix != ".parquet":
        study = ""
        if p.suffix in (".csv", ".parquet"):
            study = " (a table of the study's columns calibrates the study's cluster: --cluster study-*)"
        raise UserError(
            f"--calibrate {p}: not a run directory of `ddlbench sweep` (no summary.parquet there); give the "
            f"directory a sweep wrote with --output{study}"
        )
    shaped = False
    sweep = f.parent / "sweep.yaml"
    if sweep.is_file():
        try:
            shaped = bool((yaml.safe_load(sweep.read_text()) or {}).get("testbed"))
        except yaml.YAMLError:
            shaped = False
    cores = 0
    env = f.parent / "environment.parquet"
    if env.is_file():
        e = pd.read_parquet(env)
        if "cpu_count" in e and len(e) and pd.notna(e["cpu_count"].iloc[0]):
            cores = int(e["cpu_count"].iloc[0])
    return str(p), pd.read_parquet(f), shaped, cores


def sweep_name(path: Path) -> str:
    """The name in a run directory's sweep.yaml (the same for every round of one sweep file); its folder's name
    where it has none."""
    f = Path(path) / "sweep.yaml"
    try:
        name = (yaml.safe_load(f.read_text()) or {}).get("name") if f.is_file() else None
    except yaml.YAMLError:
        name = None
    return str(name or Path(path).name)


def sweep_key(path: Path) -> str:
    """What makes run directories rounds of one sweep: the same sweep file (its sweep.yaml, as parsed, in a canonical
    dump); a directory without a readable one is a sweep of its own (its path)."""
    f = Path(path) / "sweep.yaml"
    try:
        body = yaml.safe_load(f.read_text()) if f.is_file() else None
    except yaml.YAMLError:
        body = None
    return yaml.safe_dump(body, sort_keys=True) if isinstance(body, dict) else f"path:{Path(path).resolve()}"


def grouped(sources) -> list[list]:
    """The sources grouped as rounds of one sweep file (run directories with the same sweep file together; a table
    alone), in the order first given."""
    groups: dict[str, list] = {}
    for i, p in enumerate(sources):
        key = f"table:{i}" if isinstance(p, pd.DataFrame) else sweep_key(Path(p))
        groups.setdefault(key, []).append(p if isinstance(p, pd.DataFrame) else Path(p))
    return list(groups.values())


def _rounds(paths: list[Path]) -> tuple[pd.DataFrame, list[str], bool, int]:
    """The ok cells of every round, one table with each row's round (`_round`); the columns that identify a cell
    there; whether any round was shaped and the first cores recorded (`summary_of`)."""
    parts, shaped, cores = [], False, 0
    for i, p in enumerate(paths):
        _name, s, sh, c = summary_of(p)
        shaped, cores = shaped or sh, cores or c
        if "status" in s:
            s = s[s["status"] == "ok"]
        parts.append(s.assign(_round=i))
    d = pd.concat(parts, ignore_index=True)
    return d, [c for c in CELL if c in d], shaped, cores


def pooled(paths: list[Path]) -> pd.DataFrame:
    """One table of the cells of several rounds of one sweep (the ok cells; a cell that ended ok in only some rounds
    pools those), with `rounds` the number pooled. Its attrs name it, as the first round with `+rN` (N rounds), and
    carry the first round's `shaped` and `cores` (`summary_of`)."""
    d, keys, shaped, cores = _rounds(paths)
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


def pooled_sources(sources) -> list:
    """The sources for own_calibration.read_runs: a sweep given once as itself (a run directory or a table), a sweep
    file run in several rounds as their pooled table (`pooled`)."""
    return [g[0] if len(g) == 1 else pooled(g) for g in grouped(sources)]


def round_spread(paths) -> pd.DataFrame:
    """Per cell of a sweep run in several rounds: how far its rounds' medians lie apart, relative to their mean
    (percent), with the sweep's host count; the cells of a sweep given once are left out."""
    rows = []
    for g in grouped(paths):
        if len(g) < 2:  # given once (a table is never a round)
            continue
        d, keys, _shaped, _cores = _rounds(g)
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
