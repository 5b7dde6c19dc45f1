"""A communication probe for this box: 2 gloo ranks time all-reduce and a point-to-point ping-pong over
the sizes mgwfbp's start-up probe uses (4 KiB .. 16 MiB), with the one collective timer
(harness.commbench), and write one commbench table that `ddlbench predict --commbench` reads (its
all-reduce rows give alpha/beta, its p2p rows the parameter-server link).

    python scripts/reference/loopback_probe.py -o loopback-comm.parquet [--workers 2] [--reps 5]

The same as `ddlbench commbench --collective allreduce` plus `--collective p2p` into one run directory;
the ranks' working files live in a private temporary directory, removed afterwards.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import pandas as pd

from harness.commbench.driver import commbench_cell, measure
from harness.core.atomic import write_parquet_atomic
from harness.grouping.cost import ALPHA_BETA_PROBE_SIZES


def probe(workers: int = 2, reps: int = 5, sizes: list[int] | None = None, network: str = "loopback") -> pd.DataFrame:
    """All-reduce and p2p rows (COMMBENCH_COLUMNS) measured on this box."""
    sizes = sizes or ALPHA_BETA_PROBE_SIZES
    frames = []
    with tempfile.TemporaryDirectory(prefix="ddlbench-probe-") as tmp:  # mode 0700, unpredictable name
        for collective in ("allreduce", "p2p"):
            cell = commbench_cell(workers, collective, sizes, reps, warmup=1, network=network, timeout_s=300.0)
            frames.append(measure(cell, Path(tmp) / collective, "loopback-probe"))
    return pd.concat(frames, ignore_index=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python scripts/reference/loopback_probe.py")
    ap.add_argument("-o", "--output", required=True)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--reps", type=int, default=5)
    a = ap.parse_args(argv)
    df = probe(a.workers, a.reps)
    write_parquet_atomic(df, Path(a.output))
    print(df.groupby(["collective", "size_bytes"])["time_s"].median().to_string())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
