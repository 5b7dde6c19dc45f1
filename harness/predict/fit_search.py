"""The search steps of harness/predict/fitting.py (docs/ARCHITECTURE.md, "Calibration"): each cell's residual,
the multi-start bounded least squares, the Jacobian, and the part of a sourced range the cells allow."""

from __future__ import annotations

import math

import numpy as np
from scipy.optimize import least_squares

BAD = 1000.0
"""The residual of a cell whose simulation failed at these values (in units of its uncertainty; a cell 100x off
its measurement is about 460)."""


def residuals(params, values, predict, cells, keys, u) -> np.ndarray:
    """Each cell's log(predicted / measured) over its uncertainty at unit coordinates `u` of `params`."""
    v = {**values, **{p.name: p.value(x) for p, x in zip(params, u)}}
    try:
        got = predict(v, keys)
    except (ValueError, ZeroDivisionError, ArithmeticError):
        return np.full(len(keys), BAD)
    out = np.empty(len(keys))
    for i, k in enumerate(keys):
        x = got.get(k, math.nan)
        out[i] = math.log(x / cells.mean[k]) / cells.sigma(k) if x and x > 0 and math.isfinite(x) else BAD
    return out


def solve(params, values, predict, cells, keys, starts: list[np.ndarray], max_nfev: int):
    best, evals = None, 0
    for u0 in starts:
        r = least_squares(lambda u: residuals(params, values, predict, cells, keys, u), u0, bounds=(0.0, 1.0),
                          diff_step=0.02, x_scale=1.0, max_nfev=max_nfev, method="trf")
        evals += r.nfev
        if best is None or r.cost < best.cost:
            best = r
    return best, evals


def jacobian(params, values, predict, cells, keys, u, step: float = 0.05) -> np.ndarray:
    """d residual / d unit coordinate by central differences (one-sided at a bound)."""
    base = residuals(params, values, predict, cells, keys, u)
    J = np.zeros((len(keys), len(params)))
    for k in range(len(params)):
        up, dn = u.copy(), u.copy()
        up[k], dn[k] = min(1.0, u[k] + step), max(0.0, u[k] - step)
        if up[k] - dn[k] <= 0:
            continue
        r_up = residuals(params, values, predict, cells, keys, up) if up[k] != u[k] else base
        r_dn = residuals(params, values, predict, cells, keys, dn) if dn[k] != u[k] else base
        J[:, k] = (r_up - r_dn) / (up[k] - dn[k])
    return J


def allowed(params, values, predict, cells, keys, u, k) -> tuple[tuple[float, float], float]:
    """A parameter the cells do not move near the optimum may still be bounded by them on one side (a host path
    that would throttle the edge below what was measured): of ALLOWED_POINTS across its sourced range and its
    sourced value, those whose cost stays within 1 of the fit's; returns ((lowest, highest) of those, the one
    nearest the sourced value), the range its draws take and the value it keeps."""
    p = params[k]
    fitted = p.value(u[k])
    best = float(np.sum(residuals(params, values, predict, cells, keys, u) ** 2))
    lo, hi = p.sourced[1], p.sourced[2]
    grid = np.geomspace(lo, hi, ALLOWED_POINTS) if lo > 0 and hi / lo > 2 else np.linspace(lo, hi, ALLOWED_POINTS)
    ok = []
    for x in (*grid, p.sourced[0]):
        w = u.copy()
        w[k] = p.unit_of(x)
        if float(np.sum(residuals(params, values, predict, cells, keys, w) ** 2)) <= best + 1.0:
            ok.append(float(x))
    if not ok:  # none of its sourced range fits the cells: the fitted value stands alone (a finding)
        return (fitted, fitted), fitted
    return (min(ok), max(ok)), min(ok, key=lambda x: abs(x - p.sourced[0]))


ALLOWED_POINTS = 9
"""Points of a parameter's sourced range tried when the cells do not determine it (`_allowed`)."""
