"""Tidy commbench rows (harness.core.schema.COMMBENCH_COLUMNS) from a cell's result, with the alpha-beta fit
over the per-size medians (pure)."""

from __future__ import annotations

import statistics
from typing import TYPE_CHECKING

import pandas as pd

from harness.core.schema import COMMBENCH_COLUMNS, SCHEMA_VERSION
from harness.grouping.cost import fit_alpha_beta
from harness.measure.stats import busbw_factor

if TYPE_CHECKING:  # annotations only
    from harness.contracts.cell import CellSpec


def rows(run_id: str, cell: CellSpec, result: dict) -> pd.DataFrame:
    n = cell.workers
    coll = cell.knobs["collective"]
    factor = busbw_factor(coll, n)
    out = []
    med_sizes, med_times = [], []
    for size_s, samples in result["times"].items():
        size = int(size_s)
        med_sizes.append(size)
        med_times.append(statistics.median(samples))
        for rep, t in enumerate(samples):
            alg = size * 8 / t / 1e9
            out.append(
                {
                    "schema_version": SCHEMA_VERSION,
                    "run_id": run_id,
                    "collective": coll,
                    "backend": cell.backend,
                    "workers": n,
                    "size_bytes": size,
                    "rep": rep,
                    "time_s": t,
                    "algbw_gbit_s": alg,
                    "busbw_gbit_s": alg * factor,
                    "network": cell.network,
                    "dist_backend": result.get("dist_backend", ""),
                }
            )
    alpha, beta = fit_alpha_beta([float(s) for s in med_sizes], med_times) if len(med_sizes) > 1 else (0.0, 0.0)
    df = pd.DataFrame(out)
    df["fit_alpha_s"], df["fit_beta_s_per_byte"] = alpha, beta
    return df[COMMBENCH_COLUMNS]
