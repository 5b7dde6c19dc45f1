"""The one shape of every calibration (docs/ARCHITECTURE.md, "Calibration"): what a fit of named physical
parameters to a user's measured cells is, whichever stacks it fits (the study's 2019 stacks from its one-node and
two-node tables, harness/study/; ddlbench's own stacks from a user's runs, harness/predict/own_calibration.py).

- its parameters are typed data with their sourced ranges and search bounds, in a data file beside the code that
  uses them (`read_bounded`: each an `Input` of harness/predict/inputs.py and the bounds the fit searches);
- one fitter (harness/predict/fitting.py: blocks fitted in turn, bounded least squares, bootstrap draws);
- one leave-one-workload-out (`leave_one_workload_out`: every workload's cells predicted by a fit to the others,
  the folds in processes of their own while the whole fit runs);
- one discrepancy rule (`misses`: per method, the log-errors the fit still misses, clipped to MISS_CLIP robust
  sigmas), which intervals draw;
- one door: a cluster's `ClusterEntry.calibrate` (harness/predict/clusters.py) returns a `Calibration`, and
  `ddlbench predict --calibrate` and `ddlbench advise --calibrate` take any calibration through it.

    class MyCalibration:                    # meets the protocol: isinstance(cal, Calibration) holds
        fit: Fit
        values: dict
        def draws(self, n, seed=0): ...
        def table(self): ...
        def discrepancy(self): return misses(self.lowo if self.lowo is not None else self.cells)
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable

import numpy as np
import pandas as pd
import tomllib
from scipy.stats import median_abs_deviation

from harness.core.errors import UserError
from harness.predict.fitting import Fit, Param
from harness.predict.inputs import Input


@runtime_checkable
class Calibration(Protocol):
    """What every calibration is: its fit, every value the predictor reads with the fitted ones in, the fit's
    uncertainty as value sets, one row per parameter, and what the fit still misses per method."""

    fit: Fit
    """The fit (harness/predict/fitting.py): `converged` and `message` speak for the whole calibration."""

    @property
    def values(self) -> dict:
        """Every value the predictor reads, the fitted ones in."""
        ...

    def draws(self, n: int, seed: int = 0) -> list[dict]:
        """n value sets spread as the fit's uncertainty."""
        ...

    def table(self) -> pd.DataFrame:
        """One row per parameter: value, interval, determined, sourced range, the cells that move it."""
        ...

    def discrepancy(self) -> dict[str, np.ndarray]:
        """Per method, the log-ratios (predicted / measured) the fit still misses (`misses`)."""
        ...

    methods: tuple[str, ...] | None
    """The methods whose parameters it fits (the others are predicted as stated); None: every method of its
    cluster."""
    networks: list[str]
    """The networks between nodes it fitted that a prediction naming none is made on (ddlbench's own stacks from a
    two-node run); empty where the cluster predicted brings its own networks."""

    def compute(self, model):
        """A compute model (harness/sim/model.ComputeModel) at the speed the calibration saw, where it sets one."""
        ...

    def check_request(self, methods: list[str], networks_given: bool, where: str) -> None:
        """A one-line UserError for what a prediction asks that the calibration cannot answer."""
        ...


class OfItsCluster:
    """What a calibration that enters a prediction only through its cluster's own curve (the values it fits: the
    study's) answers for the rest of the protocol: every method of the cluster, no networks of its own, the compute
    as given, nothing to refuse."""

    methods = None
    networks: list[str] = []  # noqa: RUF012 - read only: the protocol's empty default

    def compute(self, model):
        return model

    def check_request(self, methods: list[str], networks_given: bool, where: str) -> None:
        return None


class FittedCells:
    """The members every calibration computes the same way from its `fit` and its fitted `cells` (and `lowo`, its
    leave-one-workload-out cells, or None): every value with the fitted ones in, the bootstrap's draws, one row per
    parameter, and the discrepancy by the one rule (`misses`: leave-one-workload-out where run, else the fitted
    cells). A calibration with more than one fit overrides `draws` and `table`."""

    fit: Fit
    cells: pd.DataFrame
    lowo: pd.DataFrame | None

    @property
    def values(self) -> dict:
        return dict(self.fit.values)

    def draws(self, n: int, seed: int = 0) -> list[dict]:
        return self.fit.draws(n, seed)

    def table(self) -> pd.DataFrame:
        return pd.DataFrame(self.fit.table())

    def discrepancy(self) -> dict[str, np.ndarray]:
        return misses(self.lowo if self.lowo is not None else self.cells)


Calibrate = Callable[[tuple, dict], Calibration]
"""A cluster's door (`ClusterEntry.calibrate`): (the --calibrate sources as given, {workload: profile table})
-> its calibration."""


def require_converged(cal: Calibration, where: str, then: str) -> Calibration:
    """`cal`, or the one-line refusal every command gives for a fit that did not converge (`then`: what it does not
    do and how to fix it)."""
    if not cal.fit.converged:
        raise UserError(f"--calibrate {where}: the fit did not converge ({cal.fit.message}); {then}")
    return cal


# --- parameters as data ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Bounded:
    """A fitted parameter as data: its input (sourced value, range, unit, what, source) and the bounds the fit
    searches (the sourced range widened to what is physically possible, so that a fitted value far from its source
    shows instead of sticking at the source's end)."""

    input: Input
    search: tuple[float, float]

    def param(self, name: str | None = None, search: bool = True) -> Param:
        """The fitter's parameter (harness/predict/fitting.Param), named `name` (default the input's)."""
        i = self.input
        return Param(name or i.name, *self.search, (i.value, i.low, i.high), i.unit, search)

    def scaled(self, factor: float) -> Bounded:
        """The same parameter with value, range and bounds given relative to `factor` (a rate stated as a share
        of the configured rate) multiplied out."""
        i = self.input
        return Bounded(
            Input(i.name, factor * i.value, factor * i.low, factor * i.high, i.unit, i.what, i.source, i.kind),
            (factor * self.search[0], factor * self.search[1]),
        )


BOUNDED_KEYS = {"value", "low", "high", "search", "unit", "kind", "what", "source"}
"""What each parameter's table holds in a data file of fitted parameters (`read_bounded`)."""


def read_bounded(path: Path) -> dict[str, dict[str, Bounded]]:
    """The fitted parameters a data file states: `[GROUP.NAME]` tables of BOUNDED_KEYS, returned as
    {group: {name: Bounded}} in the file's order. A file that breaks the shape raises ValueError naming the file
    and the key (the files ship with the package: a bad one is a bug of the project, not of the user's input)."""
    doc = tomllib.loads(Path(path).read_text())
    out: dict[str, dict[str, Bounded]] = {}
    for group, body in doc.items():
        out[group] = {}
        for name, t in body.items():
            keys = set(t)
            if keys != BOUNDED_KEYS:
                raise ValueError(
                    f"{path}: [{group}.{name}] needs exactly {', '.join(sorted(BOUNDED_KEYS))}; "
                    f"missing {sorted(BOUNDED_KEYS - keys)}, unknown {sorted(keys - BOUNDED_KEYS)}"
                )
            lo, hi = (float(x) for x in t["search"])
            if not lo <= float(t["low"]) or not float(t["high"]) <= hi:
                raise ValueError(f"{path}: [{group}.{name}] searches [{lo}, {hi}], narrower than its sourced range")
            value, low, high = (float(t[k]) for k in ("value", "low", "high"))
            i = Input(name, value, low, high, t["unit"], t["what"], t["source"], t["kind"])
            out[group][name] = Bounded(i, (lo, hi))
    return out


# --- leave one workload out -----------------------------------------------------------------------------------


def leave_one_workload_out(
    workloads: Sequence[str],
    fold: Callable[[str], pd.DataFrame],
    whole: Callable[[], object],
    processes: int | None = None,
) -> tuple[object, pd.DataFrame | None]:
    """(the whole fit, each held-out workload's cells predicted by a fit to the others): `fold(held)` returns the
    held-out workload's cells (columns measured and predicted at least; `error` is added), `whole()` the fit to
    every workload. With more than one workload the folds run in forked processes (their inputs shared, each fold
    deterministic) while the whole fit runs here; with one there is nothing to hold out (None)."""
    if len(workloads) < 2:
        return whole(), None
    processes = processes or min(len(workloads), os.cpu_count() or 1)
    if processes > 1:
        global _FOLD
        _FOLD = fold  # the forked workers inherit it (a closure does not pickle; a name in this module does)
        try:
            with multiprocessing.get_context("fork").Pool(processes) as pool:
                pending = pool.map_async(_run_fold, list(workloads))
                fit = whole()
                parts = pending.get()
        finally:
            _FOLD = None
    else:
        fit = whole()
        parts = [fold(w) for w in workloads]
    held = pd.concat(parts, ignore_index=True)
    held["error"] = held["predicted"] / held["measured"] - 1
    return fit, held


_FOLD: Callable[[str], pd.DataFrame] | None = None
"""The fold of the leave-one-workload-out running now (`leave_one_workload_out`), for its forked workers."""


def _run_fold(held: str) -> pd.DataFrame:
    assert _FOLD is not None
    return _FOLD(held)


# --- the discrepancy ------------------------------------------------------------------------------------------


MISS_CLIP = 3.0
"""A method's misses are clipped to its median +- this many robust sigmas: a held-out fit stuck in a far basin (one
fold whose per-partition costs extrapolate to a workload of many small tensors) is a finding the report names, not
the model's typical miss, and one such draw would stretch every interval of the method to a tenth of its value."""


def misses(cells: pd.DataFrame) -> dict[str, np.ndarray]:
    """Per scheme, log(predicted / measured) of the cells of a table with those columns, clipped (MISS_CLIP): the one
    discrepancy rule of every calibration."""
    ok = cells[np.isfinite(cells["predicted"]) & (cells["predicted"] > 0)]
    out = {}
    for m, g in ok.groupby("scheme"):
        r = np.log(g["predicted"].to_numpy() / g["measured"].to_numpy())
        mid, sigma = np.median(r), median_abs_deviation(r, scale="normal")
        out[m] = np.clip(r, mid - MISS_CLIP * sigma, mid + MISS_CLIP * sigma)
    return out
