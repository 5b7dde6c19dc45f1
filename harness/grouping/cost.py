"""The all-reduce cost model t(m) = alpha + beta * m that MG-WFBP plans with: its least-squares fit from
timed message sizes, the sizes a start-up probe times, and MB, the unit size knobs are given in."""

from __future__ import annotations

MB = 1 << 20
"""Bytes in the MB of every size knob (`bucket_cap_mb`, `partition_mb`, ...)."""
ALPHA_BETA_PROBE_SIZES = [1 << k for k in range(12, 25, 2)]
"""Message sizes (4 KiB .. 16 MiB) an all-reduce start-up probe times before fitting alpha/beta
(mgwfbp's own probe; the predictor replays its fit from commbench rows of these sizes)."""


def comm_time(nbytes: float, alpha: float, beta: float) -> float:
    return alpha + beta * nbytes


def fit_alpha_beta(sizes_bytes: list[float], times_s: list[float]) -> tuple[float, float]:
    """Least-squares line t = alpha + beta * bytes; alpha clipped at 0 (a negative start-up is noise)."""
    n = len(sizes_bytes)
    if n < 2:
        raise ValueError("need at least two sizes to fit alpha and beta")
    mx = sum(sizes_bytes) / n
    my = sum(times_s) / n
    sxx = sum((x - mx) ** 2 for x in sizes_bytes)
    sxy = sum((x - mx) * (y - my) for x, y in zip(sizes_bytes, times_s))
    beta = sxy / sxx if sxx else 0.0
    alpha = my - beta * mx
    return max(alpha, 0.0), max(beta, 0.0)
