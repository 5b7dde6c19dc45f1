"""Fitting named physical parameters of a simulation to measured cells (docs/ARCHITECTURE.md, "Calibration").

A `Param` is one model input searched inside bounds (its sourced range, or wider where the source is a guess),
in unit coordinates (log-spaced where the bounds span more than 10x). A `Block` is the parameters that a set of
cells determines (ByteScheduler's costs from ByteScheduler's cells, ...): blocks are fitted one after another,
each with the earlier blocks' values, then all together once (a polish from the blocks' answer). A block whose cost
is rugged (`Block.scan`) is searched whole first: a Latin-hypercube scan of its range is the first generation of a
differential evolution (scipy's, seeded, its own polish off) run GENERATIONS more; bounded least squares (trf) then
starts from the best points found. A parameter its own block's cells leave free (a NIC rate above the host path
that binds the ring) is searched again, within what those cells allow of it, by each later block searched whole
whose cells move it (the PS cells over that NIC): what trades off across blocks is searched together.

The cost is least squares of each cell's log-ratio (predicted / measured) over its uncertainty: the cell's own
run-to-run spread (std / mean) or the model's floor, whichever is larger. A simulation that fails for a set
of values gives every cell of it a large residual (BAD), so the search keeps away without stopping.

    fit = fit_params(blocks, predict, cells, start)   # predict(values, keys) -> {cell key: samples/s}
    fit.values, fit.converged, fit.table()             # the fitted values, one row per parameter
    draws = fit.draws(32, seed=0)                      # the fit's uncertainty as value sets (the refits)

Uncertainty comes from refitting resampled cells (`fit_params(refits=)`, REFITS by default): each cell replaced by
its prediction at the optimum off by its residual there (at least its own uncertainty) in a random direction (a wild
bootstrap, Rademacher signs), then every block fitted again by a local search: from the optimum, or, in a block
whose cells leave a valley (a parameter free there, or carried in), from the points of its global search's first
generation in turn (from the optimum again where that ends in a worse basin). Parameters that trade off (a
host path against a NIC rate, a worker's cost against a server's) thus spread along what the cells allow instead of
staying at the corner the fit stopped in; a parameter's interval is the 10-90% of its refitted values. A parameter
the cells do not move near the optimum (its whole range changes no cell by a quarter of its uncertainty, scipy's
Jacobian) is *not determined*: it keeps the part of its sourced range that the cells allow (a one-sided bound
shows: a host path below some rate would throttle what was measured), and its sourced value if allowed. The refits
run in forked processes where there are cores to spare, each from its own seed: the same seed gives the same draws.
The Jacobian is scipy's own (`least_squares`' `jac`) where the last search ran over every cell of the fit;
central differences where no search did (`_fit_jacobian`).
"""

from __future__ import annotations

import math
import multiprocessing
import os
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np
from scipy.optimize import differential_evolution, least_squares
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
GENERATIONS = 1
"""Differential-evolution generations after a block's scan (its first generation): a rate binds only below its
path's slowest other part, so the scan's best points may sit on a plateau; a generation of trial points bred from
the best and the spread of the others moves them towards the cells' valley for the cost of one more scan."""
REFITS = 24
"""Refits of resampled cells behind a fit's intervals: their 10th and 90th percentiles rest on 2 or 3 refits each."""
REFIT_NFEV = 8
"""Steps of a refit's local search (each one simulation and a Jacobian's worth): a refit starts at the optimum of
cells that moved by their uncertainty, or on the global search's best points; one that has not come within the
fit's cost (NEAR) in that many is restarted from the optimum (`_Refit`)."""
NEAR = 1.0
"""A refit started away from the optimum is kept when it costs at most this much more per cell (squared units of
uncertainty) than the fitted values on its cells: it found the same valley, not a worse basin."""


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
    """A rugged cost (threads racing for a lock, thresholds): first search the block's range whole (this many
    Latin-hypercube points, then GENERATIONS of differential evolution) and start the local searches from the best
    points; 0 = start from the given values."""


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
    """Parameters the cells do not determine -> the (low, high) of their sourced range the cells allow, widened to
    the values the refits took (each fits its resampled cells: allowed by them too)."""
    refitted: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))
    """Unit coordinates of every parameter (columns, in `params`' order) fitted again to each resampled set of
    cells (rows): the fit's uncertainty; no rows where `fit_params(refits=0)` asked for the values only."""

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
        """n draws of the unit coordinates (rows): the determined parameters' refitted values (n of the refits,
        each at most once while there are enough, with replacement beyond), the others anywhere in what the cells
        allow of their sourced range. Without refits the determined parameters stay at the optimum."""
        rng = np.random.default_rng(seed)
        u0 = np.array([p.unit_of(self.values[p.name]) for p in self.params])
        det = np.array(list(self.determined().values()), dtype=bool)
        out = np.tile(u0, (n, 1))
        if len(self.refitted):
            rows = rng.choice(len(self.refitted), size=n, replace=n > len(self.refitted))
            out[:, det] = self.refitted[rows][:, det]
        for k in np.flatnonzero(~det):  # not determined: anywhere in what the cells allow of its sourced range
            lo, hi = self._range(k)
            out[:, k] = [self.params[k].unit_of(x) for x in lo + rng.random(n) * (hi - lo)]
        return out

    def _range(self, k: int) -> tuple[float, float]:
        """What an undetermined parameter's draws span: what the cells allow of its sourced range (its sourced
        range where no cell was tried, its search bounds where it has no source)."""
        p = self.params[k]
        return self.allowed.get(p.name) or (
            (p.sourced[1], p.sourced[2]) if math.isfinite(p.sourced[1]) else (p.low, p.high)
        )

    def draws(self, n: int, seed: int = 0) -> list[dict]:
        """n value sets (the fitted parameters only) spread as the fit's uncertainty."""
        return [{p.name: p.value(u[k]) for k, p in enumerate(self.params)} for u in self.unit_draws(n, seed)]

    def table(self, n: int = 400, seed: int = 0) -> list[dict]:
        """One row per parameter: value, 10th-90th percentile interval (of the refits where the cells determine it,
        of `n` draws of what they allow where not), determined, sourced range, cells."""
        draws = self.unit_draws(n, seed)
        det, cells = self.determined(), self.determining_cells()
        rows = []
        for k, p in enumerate(self.params):
            us = self.refitted[:, k] if det[p.name] and len(self.refitted) else draws[:, k]
            xs = np.array([p.value(u) for u in us])
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
    refits: int = REFITS,
) -> Fit:
    """Fit each block's parameters to its cells in turn (later blocks see earlier blocks' values), then, with
    `polish`, all of them together once from there. `values`: every input at its starting value; `starts`:
    tries per block (the first from `values`, the others at random, or the best points of the block's global
    search), the best kept; `skip`: the first blocks are fitted already (their values are in `values`; the refits
    fit them again too); `refits`: resampled sets of cells fitted again for the intervals (0: the values only, as
    a leave-one-workload-out fold needs)."""
    rng = np.random.default_rng(seed)
    v = dict(values)
    evals, ok, msgs = 0, True, []
    last = None  # the last search: (its least_squares result, its parameters, its cells)
    plan = {}  # block name -> (the parameters it searched, the unit points its refits start from: optimum first)
    carried: list[Param] = []  # parameters their own block's cells left free, within what those cells allow
    for j, b in enumerate(blocks[skip:], start=skip):
        keys = [k for k in b.cells if k in cells.mean]
        moved = [c for c in carried if b.scan and _moves(c, v, predict, cells, keys)]
        evals += 2 * len(carried) if b.scan else 0
        own = [p for p in b.params if p.search]
        searched = own + moved
        r, spread, n = _search(b.scan, searched, v, predict, cells, keys, rng, starts, max_nfev)
        evals += n
        # where a parameter trades off here (one carried from an earlier block, or one of this block's own that these
        # cells leave free and no later block takes on), the refits start across the global search's first
        # generation (spread over the whole range), so that they spread along the valley; elsewhere from the optimum
        # (a valley an earlier block's cells cannot see the end of is the later block's to explore, within bounds)
        later = any(x.scan for x in blocks[j + 1 :])
        free = np.max(np.abs(np.asarray(r.jac)), axis=0, initial=0.0) < REACH
        valley = bool(moved) or (not later and bool(np.any(free[: len(own)])))
        plan[b.name] = (searched, [r.x, *spread] if valley else [r.x])
        v.update({p.name: p.value(x) for p, x in zip(searched, r.x)})
        ok &= r.status > 0
        msgs.append(f"{b.name}: {r.message}")
        last = (r, searched, keys)
        if later:
            carried, n = _carry(carried, own, moved, v, predict, cells, keys, r)
            evals += n
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
    fit = Fit(params, v, keys, res, jac, ok and good, "; ".join(msgs), evals, got, free)
    return _refitted(fit, _Refit(blocks, predict, cells, fit, plan, polish, seed), refits)


def _search(scan: int, searched, v, predict, cells, keys, rng, starts: int, max_nfev: int):
    """One block's search: (the best least_squares result, the global search's first generation best first (none
    where the search was local), the simulations spent)."""
    u0 = np.array([p.unit_of(v[p.name]) for p in searched])
    tries = [u0] + [rng.random(len(searched)) for _ in range(max(0, starts - 1))]
    evals = 0
    if scan:
        best, spread, evals = _global(searched, v, predict, cells, keys, u0, scan, rng)
        tries = best[: max(1, starts)]
    r, n = _solve(searched, v, predict, cells, keys, tries, max_nfev)
    return r, spread if scan else [], evals + n


def _carry(carried: list, own: list, moved: list, v, predict, cells, keys, r) -> tuple[list, int]:
    """The parameters carried on after a block (`r` its search over `own` + `moved`): a parameter these cells leave
    free here (a NIC rate above the host path that binds the ring) is searched again, within what these cells allow
    of it, by the later blocks searched whole whose cells it moves (the PS cells over that NIC): what trades off
    across two blocks is then searched, and refitted, together. A carried parameter these cells fix stops here."""
    free = np.max(np.abs(np.asarray(r.jac)), axis=0, initial=0.0) < REACH
    out = [c for c in carried if c not in moved] + [c for c, f in zip(moved, free[len(own) :]) if f]
    evals = 0
    for p, f in zip(own, free[: len(own)]):
        if f:
            narrowed, n = _narrowed(p, own + moved, v, predict, cells, keys, r)
            evals += n
            out += [narrowed] if narrowed.high > narrowed.low else []
    return out, evals


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
        evals += r.nfev + (r.njev or 0) * len(u0)  # and the Jacobians' forward differences
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


def _global(params, values, predict, cells, keys, u0, scan: int, rng) -> tuple[list, list, int]:
    """The block's range searched whole: `u0` and `scan` Latin-hypercube points are the first generation of a
    differential evolution run GENERATIONS more (scipy's, its own polish off: the local search follows). Returns
    its last population best first (the local search's starts), the first generation best first (spread over the
    whole range: the refits' starts), and the simulations spent."""
    first = np.vstack([u0, qmc.LatinHypercube(len(params), rng=rng).random(max(scan, 4))])
    seen = []  # (cost, point) of every evaluation, the first generation first

    def cost(u) -> float:
        c = float(np.sum(_residuals(params, values, predict, cells, keys, u) ** 2))
        seen.append((c, np.array(u, dtype=float)))
        return c

    r = differential_evolution(
        cost, [(0.0, 1.0)] * len(params), maxiter=GENERATIONS, init=first, rng=rng, polish=False, tol=0.0
    )
    last = [r.population[i] for i in np.argsort(r.population_energies, kind="stable")]
    spread = [u for _, u in sorted(seen[: len(first)], key=lambda cu: cu[0])]
    return last, spread, r.nfev


# --- the intervals: the cells resampled and fitted again ---------------------------------------------------------


@dataclass(frozen=True)
class _Refit:
    """One fit's refits: refit `i` fits every block again, by a local search over what the fit searched in it, to
    the cells resampled with seed (seed, i): from the optimum, or where the block's cells leave a valley from the
    i-th point of its global search's first generation (again from the optimum if that ends in a worse basin than
    the fit's); a block fitted already (`skip`) from the fitted values."""

    blocks: list
    predict: Callable
    cells: Cells
    fit: Fit
    plan: dict
    """Block name -> (the parameters searched in it, the unit points its refits start from)."""
    polish: bool
    seed: int

    def __call__(self, i: int) -> tuple[np.ndarray, int]:
        cells = _resampled(self.fit, self.cells, np.random.default_rng([self.seed, i]))
        v, evals = dict(self.fit.values), 0
        for b in self.blocks:
            keys = [k for k in b.cells if k in cells.mean]
            searched, pool = self.plan.get(b.name) or ([p for p in b.params if p.search], [])
            pool = pool or [np.array([p.unit_of(v[p.name]) for p in searched])]
            r, n = _solve(searched, v, self.predict, cells, keys, [pool[i % len(pool)]], REFIT_NFEV)
            evals += n
            if i % len(pool) and 2 * r.cost > self._bound(keys):  # a worse basin than the fit's: from the optimum
                r, n = _solve(searched, v, self.predict, cells, keys, [pool[0]], REFIT_NFEV)
                evals += n
            v.update({p.name: p.value(x) for p, x in zip(searched, r.x)})
        if self.polish:
            searched = [p for p in self.fit.params if p.search]
            u0 = np.array([p.unit_of(v[p.name]) for p in searched])
            r, n = _solve(searched, v, self.predict, cells, self.fit.keys, [u0], REFIT_NFEV)
            evals += n
            v.update({p.name: p.value(x) for p, x in zip(searched, r.x)})
        return np.array([p.unit_of(v[p.name]) for p in self.fit.params]), evals

    def _bound(self, keys) -> float:
        """The most a refit of these cells may cost: what the fitted values cost on them (each cell off by its
        residual, at least its uncertainty), and NEAR more per cell."""
        at = dict(zip(self.fit.keys, self.fit.residuals))
        return sum(max(abs(at.get(k, 0.0)), 1.0) ** 2 + NEAR for k in keys)


def _refitted(fit: Fit, job: _Refit, refits: int) -> Fit:
    """`fit` with its refits; the allowed range of an undetermined parameter widened to the values the refits took
    (each fits its resampled cells: allowed by them too)."""
    fit.refitted, n = _refit_all(job, refits)
    fit.evaluations += n
    for k, p in enumerate(fit.params):
        if p.name in fit.allowed and p.search and len(fit.refitted):
            xs = [p.value(x) for x in fit.refitted[:, k]]
            fit.allowed[p.name] = (min(fit.allowed[p.name][0], *xs), max(fit.allowed[p.name][1], *xs))
    return fit


def _resampled(fit: Fit, cells: Cells, rng) -> Cells:
    """The fitted cells again, each its prediction at the optimum off by its residual there (at least its own
    uncertainty) in a random direction: a wild bootstrap (Rademacher signs). A cell that failed to simulate keeps
    its measurement, moved by its uncertainty."""
    flip = rng.choice([-1.0, 1.0], size=len(fit.keys))
    mean, std = dict(cells.mean), dict(cells.std)
    for i, k in enumerate(fit.keys):
        at = fit.predicted.get(k, math.nan)
        base, r = (at, abs(fit.residuals[i])) if at > 0 and math.isfinite(at) else (cells.mean[k], 0.0)
        mean[k] = base * math.exp(flip[i] * max(r, 1.0) * cells.sigma(k))
        std[k] = cells.std.get(k, 0.0) * mean[k] / cells.mean[k]
    return Cells(mean, std)


_REFIT: _Refit | None = None
"""The refits running now (`_refit_all`), for its forked workers."""


def _run_refit(i: int) -> tuple[np.ndarray, int]:
    assert _REFIT is not None
    return _REFIT(i)


def _refit_all(job: _Refit, refits: int) -> tuple[np.ndarray, int]:
    """The refits' unit coordinates (rows in order of their seeds) and the simulations spent. Two forked processes
    where there are two cores and this process has no children of its own (a leave-one-workload-out's folds are
    running: the cores are taken) and is not one (a pool's worker may not fork)."""
    if refits <= 0:
        return np.zeros((0, len(job.fit.params))), 0
    here = multiprocessing.current_process()
    if (os.cpu_count() or 1) > 1 and not here.daemon and not multiprocessing.active_children():
        global _REFIT
        _REFIT = job  # the forked workers inherit it (a closure does not pickle; a name in this module does)
        try:
            with multiprocessing.get_context("fork").Pool(2) as pool:
                parts = pool.map(_run_refit, range(refits))
        finally:
            _REFIT = None
    else:
        parts = [job(i) for i in range(refits)]
    return np.array([u for u, _ in parts]), sum(n for _, n in parts)


def _moves(p: Param, values, predict, cells, keys) -> bool:
    """Whether these cells move with `p` across its range (at its two ends, everything else at `values`)."""
    ends = [_residuals([p], values, predict, cells, keys, [x]) for x in (0.0, 1.0)]
    return bool(np.max(np.abs(ends[1] - ends[0]), initial=0.0) >= REACH)


def _narrowed(p: Param, searched, values, predict, cells, keys, r) -> tuple[Param, int]:
    """`p` with its search bounds narrowed to what these cells allow (of ALLOWED_POINTS across its bounds, those
    whose cost stays within 1 of the block's optimum `r`), and the simulations that took."""
    k = next(j for j, q in enumerate(searched) if q.name == p.name)
    ok = []
    for x in np.linspace(0.0, 1.0, ALLOWED_POINTS):
        w = np.array(r.x, dtype=float)
        w[k] = x
        if float(np.sum(_residuals(searched, values, predict, cells, keys, w) ** 2)) <= 2 * r.cost + 1.0:
            ok.append(p.value(x))
    ok.append(p.value(r.x[k]))
    return replace(p, low=min(ok), high=max(ok)), ALLOWED_POINTS
