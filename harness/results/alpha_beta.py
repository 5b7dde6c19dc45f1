"""The alpha-beta fit a stored commbench run recorded (what mgwfbp's knob commbench_run reads)."""

from __future__ import annotations

from pathlib import Path

from harness.core.errors import UserError
from harness.results.store import load_run


def fit_from_run(run: str | Path, collective: str = "allreduce", workers: int | None = None) -> tuple[float, float]:
    """(alpha_s, beta_s_per_byte) stored by a commbench run."""
    cb = load_run(run).commbench
    if cb.empty:
        raise UserError(f"run {run} has no commbench table: run `ddlbench commbench --output {run}` first")
    sel = cb[cb["collective"] == collective]
    if workers is not None and (sel["workers"] == workers).any():
        sel = sel[sel["workers"] == workers]
    if sel.empty:
        raise UserError(f"run {run} has no {collective} measurements")
    return float(sel["fit_alpha_s"].iloc[0]), float(sel["fit_beta_s_per_byte"].iloc[0])
