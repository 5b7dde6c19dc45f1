"""Fitting named physical parameters of a simulation to measured cells (docs/ARCHITECTURE.md, "Calibration").

A `Param` is one model input searched inside bounds (its sourced range, or wider where the source is a guess),
in unit coordinates (log-spaced where the bounds span more than 10x). A `Block` is the parameters that a set of
cells determines (ByteScheduler's costs from ByteScheduler's cells, ...): blocks are fitted one after another,
each with the earlier blocks' values, then all together once (a polish from the blocks' answer).

The cost is least squares of each cell's log-ratio (predicted / measured) over its uncertainty: the cell's own
run-to-run spread (std / mean) or the model's floor, whichever is larger. A simulation that fails for a set
of values gives every cell of it a large residual (BAD), so the search keeps away without stopping.

    fit = fit_params(blocks, predict, cells, start)   # predict(values, keys) -> {cell key: samples/s}
    fit.values, fit.converged, fit.table()             # the fitted values, one row per parameter
    draws = fit.draws(32, seed=0)                      # the fit's uncertainty as value sets (bootstrap)

Uncertainty is a linearised wild bootstrap: the residuals at the optimum (at least each cell's own
uncertainty), each flipped in sign at random (Rademacher), moved through the Jacobian as one Gauss-Newton step;
a parameter the cells do not move near the optimum (its whole range changes no cell by a quarter of its
uncertainty) is *not determined*: it keeps the part of its sourced range that the cells allow (a one-sided
bound shows: a host path below some rate would throttle what was measured), and its sourced value if allowed.
The Jacobian is scipy's own (`least_squares`' `jac`) where the last search ran over every cell of the fit;
central differences where no search did (`_fit_jacobian`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from scipy.optimize import least_squares
from scipy.stats import qmc

MODEL_FLOOR = 0.01
"""A cell's uncertainty is never below 1% of it: the model's own resolution (layer profiles, rounding)."""
MAX_MISFIT = 0.25
"""A fit whose best values leave any cell further than this from its measurement has not converged to an answer:
the model cannot reproduce the cells (a method measured under other conditions, a table mixing runs)."""
SPREADS = 3.0
"""A cell counts as far only beyond this many of its own run-to-run spreads as well (std / mean, at least
MODEL_FLOOR): a noisy cell's median is itself that uncertain."""
REACH = 0.25
"""A parameter whose whole search range moves no cell by this many of its uncertainties is not determined."""
BAD = 1000.0
"""The residual of a cell whose simulation failed at these values (in units of its uncertainty; a cell 100x off
its measurement is about 460)."""
ALLOWED_POINTS = 9
"""Points of a parameter's sourced range tried when the cells do not determine it (`_allowed`)."""


@dataclass(frozen=True)
class Param:
    name: str
    """The model input it sets (a key of the values dict)."""
    low: float
    """Search bounds."""
    high: float
    sourced: tuple[float, float, float] = (math.nan, math.nan, math.nan)
    """(value, low, high) from first principles (the input's own range), reported beside the fit."""
    unit: str = ""
    search: bool = True
    """False: the cells cannot tell it from another parameter (one node sees only min(edge, host path / GPUs)):
    it is held at its starting value during the search, reported as not determined, and keeps the part of its
    sourced range the cells allow."""

    @property
    def log(self) -> bool:
        return self.low > 0 and self.high / self.low > 10

    def value(self, u: float) -> float:
        u = min(1.0, max(0.0, float(u)))
        if self.log:
            return math.exp(math.log(self.low) + u * (math.log(self.high) - math.log(self.low)))
        return self.low + u * (self.high - self.low)

    def unit_of(self, x: float) -> float:
        x = min(self.high, max(self.low, float(x)))
        if self.high == self.low:
            return 0.5
        if self.log:
            return (math.log(x) - math.log(self.low)) / (math.log(self.high) - math.log(self.low))
        return (x - self.low) / (self.high - self.low)


@dataclass(frozen=True)
class Block:
    name: str
    params: tuple[Param, ...]
    cells: tuple
    """Keys of the cells this block's parameters are fitted to."""
    scan: int = 0
    """A rugged cost (threads racing for a lock, thresholds): first evaluate this many Latin-hypercube points of
    the block's range and start the local searches from the best of them; 0 = start from the given values."""


@dataclass
class Cells:
    """The measured cells: key -> (mean, std), both samples/s."""

    mean: dict
    std: dict

    def sigma(self, key) -> float:
        """Uncertainty of the cell's log throughput."""
        m, s = self.mean[key], self.std.get(key, 0.0)
        return max(MODEL_FLOOR, (s / m) if m > 0 and s == s else 0.0)


@dataclass
class Fit:
    params: list[Param]
    values: dict
    """Every value the predictor reads: the starting values with the fitted ones in."""
    keys: list
    """The cells fitted, in the order of the residuals and the Jacobian's rows."""
    residuals: np.ndarray
    jacobian: np.ndarray
    """d residual / d unit coordinate, at the optimum."""
    converged: bool
    message: str
    evaluations: int
    predicted: dict = field(default_factory=dict)
    """key -> predicted samples/s at the fitted values."""
    allowed: dict = field(default_factory=dict)
    """Parameters the cells do not determine -> the (low, high) of their sourced range the cells allow."""

    def determined(self) -> dict[str, bool]:
        """Whether the cells move each parameter: its whole search range changes some cell by REACH of its
        uncertainty (else it keeps its sourced value and range)."""
        return {
            p.name: p.search and bool(np.max(np.abs(self.jacobian[:, k]), initial=0.0) >= REACH)
            for k, p in enumerate(self.params)
        }

    def determining_cells(self, top: int = 8) -> dict[str, list]:
        """Per parameter, the cells that move most with it (largest |Jacobian|), most first."""
        out = {}
        for k, p in enumerate(self.params):
            col = np.abs(self.jacobian[:, k])
            order = [i for i in np.argsort(-col, kind="stable") if col[i] >= REACH][:top]
            out[p.name] = [self.keys[i] for i in order]
        return out

    def unit_draws(self, n: int, seed: int = 0) -> np.ndarray:
        """n bootstrap draws of the unit coordinates (rows), determined parameters only moved."""
        rng = np.random.default_rng(seed)
        u0 = np.array([p.unit_of(self.values[p.name]) for p in self.params])
        det = np.array(list(self.determined().values()))
        J = self.jacobian[:, det]
        pinv = np.linalg.pinv(J, rcond=1e-6) if J.size else np.zeros((0, len(self.keys)))
        out = np.tile(u0, (n, 1))
        for d in range(n):
            # the data again with each cell off the fit by its residual, or by its own uncertainty where the fit
            # is closer than that, in a random direction: one Gauss-Newton step from the optimum
            flip = rng.choice([-1.0, 1.0], size=len(self.keys))
            r_star = flip * np.maximum(np.abs(self.residuals), 1.0)
            out[d, det] = np.clip(u0[det] - pinv @ r_star, 0.0, 1.0)
            for k in np.flatnonzero(~det):  # not determined: anywhere in what the cells allow of its sourced range
                p = self.params[k]
                lo, hi = self.allowed.get(p.name) or (
                    (p.sourced[1], p.sourced[2]) if math.isfinite(p.sourced[1]) else (p.low, p.high)
                )
                out[d, k] = p.unit_of(lo + rng.random() * (hi - lo))
        return out

    def draws(self, n: int, seed: int = 0) -> list[dict]:
        """n value sets (the fitted parameters only) spread as the fit's uncertainty."""
        return [{p.name: p.value(u[k]) for k, p in enumerate(self.params)} for u in self.unit_draws(n, seed)]

    def table(self, n: int = 400, seed: int = 0) -> list[dict]:
        """One row per parameter: value, 10th-90th percentile interval, determined, sourced range, cells."""
        draws = self.unit_draws(n, seed)
        det, cells = self.determined(), self.determining_cells()
        rows = []
        for k, p in enumerate(self.params):
            xs = np.array([p.value(u) for u in draws[:, k]])
            v = self.values[p.name]
            lo, hi = p.sourced[1], p.sourced[2]
            rows.append(
                {
                    "parameter": p.name,
                    "unit": p.unit,
                    "value": v,
                    "low": float(np.quantile(xs, 0.1)),
                    "high": float(np.quantile(xs, 0.9)),
                    "determined": det[p.name],
                    "search_low": p.low,
                    "search_high": p.high,
                    "sourced_value": p.sourced[0],
                    "sourced_low": lo,
                    "sourced_high": hi,
                    "inside_sourced": bool(lo <= v <= hi) if math.isfinite(lo) else None,
                    "allowed_low": self.allowed.get(p.name, (math.nan, math.nan))[0],
                    "allowed_high": self.allowed.get(p.name, (math.nan, math.nan))[1],
                    "cells": cells[p.name],
                }
            )
        return rows


def fit_params(
    blocks: list[Block],
    predict: Callable[[dict, list], dict],
    cells: Cells,
    values: dict,
    starts: int = 2,
    seed: int = 0,
    max_nfev: int = 100,
    polish: bool = True,
    skip: int = 0,
) -> Fit:
    """Fit each block's parameters to its cells in turn (later blocks see earlier blocks' values), then, with
    `polish`, all of them together once from there. `values`: every input at its starting value; `starts`:
    tries per block (the first from `values`, the others at random), the best kept; `skip`: the first blocks
    are fitted already (their values are in `values`)."""
    rng = np.random.default_rng(seed)
    v = dict(values)
    evals, ok, msgs = 0, True, []
    last = None  # the last search: (its least_squares result, its parameters, its cells)
    for b in blocks[skip:]:
        keys = [k for k in b.cells if k in cells.mean]
        searched = [p for p in b.params if p.search]
        u0 = np.array([p.unit_of(v[p.name]) for p in searched])
        tries = [u0] + [rng.random(len(searched)) for _ in range(max(0, starts - 1))]
        if b.scan:
            points = [u0, *qmc.LatinHypercube(len(searched), rng=rng).random(b.scan)]
            cost = [float(np.sum(_residuals(searched, v, predict, cells, keys, x) ** 2)) for x in points]
            evals += len(points)
            tries = [points[i] for i in np.argsort(cost)[: max(1, starts)]]
        r, n = _solve(searched, v, predict, cells, keys, tries, max_nfev)
        evals += n
        v.update({p.name: p.value(x) for p, x in zip(searched, r.x)})
        ok &= r.status > 0
        msgs.append(f"{b.name}: {r.message}")
        last = (r, searched, keys)
    params = [p for b in blocks for p in b.params]
    keys = list(dict.fromkeys(k for b in blocks for k in b.cells if k in cells.mean))
    if polish:
        searched = [p for p in params if p.search]
        r, n = _solve(searched, v, predict, cells, keys, [np.array([p.unit_of(v[p.name]) for p in searched])], max_nfev)
        evals += n
        ok = ok and r.status > 0
        msgs.append(f"all: {r.message}")
        v.update({p.name: p.value(x) for p, x in zip(searched, r.x)})
        last = (r, searched, keys)
    u = np.array([p.unit_of(v[p.name]) for p in params])
    jac, n = _fit_jacobian(params, v, predict, cells, keys, u, last)
    evals += n
    free = {}
    for k, p in enumerate(params):  # what the cells do not move here: the part of its sourced range they allow
        if (not p.search or np.max(np.abs(jac[:, k]), initial=0.0) < REACH) and math.isfinite(p.sourced[0]):
            free[p.name], v[p.name] = _allowed(params, v, predict, cells, keys, u, k)
            u[k] = p.unit_of(v[p.name])
            evals += ALLOWED_POINTS + 1
    res = _residuals(params, v, predict, cells, keys, u)
    got, good = _verdict(predict, cells, v, keys, msgs)
    if not ok:
        msgs.append("the search stopped on its evaluation limit, not on a tolerance")
    return Fit(params, v, keys, res, jac, ok and good, "; ".join(msgs), evals, got, free)


def _verdict(predict, cells: Cells, v: dict, keys: list, msgs: list) -> tuple[dict, bool]:
    """The cells at the fitted values, and whether every one simulates and lies within MAX_MISFIT of its
    measurement (what does not is said in `msgs`)."""
    try:
        got = dict(predict(v, keys))
    except (ValueError, ZeroDivisionError, ArithmeticError) as e:
        got = {}
        msgs.append(f"the fitted values fail to simulate: {e}")
    failed = [k for k in keys if not (got.get(k, math.nan) > 0)]
    if failed:
        msgs.append(f"{len(failed)} cell(s) fail to simulate at the fitted values (first: {failed[0]})")
    off = {k: got[k] / cells.mean[k] - 1 for k in keys if k not in failed}
    # a cell is far when it is off by more than MAX_MISFIT and by more than SPREADS of its own spread (a cell whose
    # iterations spread by a third does not say its median to 25%)
    limit = {k: max(MAX_MISFIT, SPREADS * cells.sigma(k)) for k in off}
    worst = max(off, key=lambda k: abs(off[k]) / limit[k], default=None)
    far = worst is not None and abs(off[worst]) > limit[worst]
    if far:
        msgs.append(
            f"the best values leave {worst} {off[worst]:+.0%} off its measurement (more than "
            f"{limit[worst]:.0%}): the model does not reproduce these cells"
        )
    return got, not failed and not far


# --- the search steps: residuals, the bounded least squares, the Jacobian, what the cells allow ---------------


def _residuals(params, values, predict, cells, keys, u) -> np.ndarray:
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


def _solve(params, values, predict, cells, keys, starts: list[np.ndarray], max_nfev: int):
    """Bounded least squares in unit coordinates from each start; the best result and the simulations spent."""
    best, evals = None, 0
    for u0 in starts:
        r = least_squares(
            lambda u: _residuals(params, values, predict, cells, keys, u),
            u0,
            bounds=(0.0, 1.0),
            diff_step=0.02,
            x_scale=1.0,
            max_nfev=max_nfev,
            method="trf",
        )
        evals += r.nfev
        if best is None or r.cost < best.cost:
            best = r
    return best, evals


def _fit_jacobian(params, values, predict, cells, keys, u, last) -> tuple[np.ndarray, int]:
    """d residual / d unit coordinate of every parameter at `u`, and the simulations that took. Where the last search
    ran over every cell of the fit, its own Jacobian at its solution (least_squares' `jac`: forward differences at
    `u`) gives the columns it searched; central differences (`_jacobian`) give the rest: parameters held at their
    start (`search=False`), and every column when the last search saw only its own block's cells (blocks fitted in
    turn without a polish: no search ran over the other blocks' cells at these values)."""
    J = np.zeros((len(keys), len(params)))
    column = {p.name: k for k, p in enumerate(params)}
    by_hand = list(range(len(params)))
    if last is not None and last[2] == keys:
        r, searched, _ = last
        for j, p in enumerate(searched):
            J[:, column[p.name]] = np.asarray(r.jac)[:, j]
        by_hand = [k for k, p in enumerate(params) if p.name not in {q.name for q in searched}]
    if not by_hand:
        return J, 0
    diff, n = _jacobian(params, values, predict, cells, keys, u, by_hand)
    J[:, by_hand] = diff[:, by_hand]
    return J, n


def _jacobian(params, values, predict, cells, keys, u, columns, step: float = 0.05) -> tuple[np.ndarray, int]:
    """d residual / d unit coordinate of the given columns by central differences (one-sided at a bound), and the
    simulations that took."""
    base = _residuals(params, values, predict, cells, keys, u)
    J, evals = np.zeros((len(keys), len(params))), 1
    for k in columns:
        up, dn = u.copy(), u.copy()
        up[k], dn[k] = min(1.0, u[k] + step), max(0.0, u[k] - step)
        if up[k] - dn[k] <= 0:
            continue
        r_up = _residuals(params, values, predict, cells, keys, up) if up[k] != u[k] else base
        r_dn = _residuals(params, values, predict, cells, keys, dn) if dn[k] != u[k] else base
        evals += int(up[k] != u[k]) + int(dn[k] != u[k])
        J[:, k] = (r_up - r_dn) / (up[k] - dn[k])
    return J, evals


def _allowed(params, values, predict, cells, keys, u, k) -> tuple[tuple[float, float], float]:
    """A parameter the cells do not move near the optimum may still be bounded by them on one side (a host path
    that would throttle the edge below what was measured): of ALLOWED_POINTS across its sourced range and its
    sourced value, those whose cost stays within 1 of the fit's; returns ((lowest, highest) of those, the one
    nearest the sourced value), the range its draws take and the value it keeps."""
    p = params[k]
    fitted = p.value(u[k])
    best = float(np.sum(_residuals(params, values, predict, cells, keys, u) ** 2))
    lo, hi = p.sourced[1], p.sourced[2]
    grid = np.geomspace(lo, hi, ALLOWED_POINTS) if lo > 0 and hi / lo > 2 else np.linspace(lo, hi, ALLOWED_POINTS)
    ok = []
    for x in (*grid, p.sourced[0]):
        w = u.copy()
        w[k] = p.unit_of(x)
        if float(np.sum(_residuals(params, values, predict, cells, keys, w) ** 2)) <= best + 1.0:
            ok.append(float(x))
    if not ok:  # none of its sourced range fits the cells: the fitted value stands alone (a finding)
        return (fitted, fitted), fitted
    return (min(ok), max(ok)), min(ok, key=lambda x: abs(x - p.sourced[0]))
