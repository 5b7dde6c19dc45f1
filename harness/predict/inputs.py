"""Model inputs with their sources and stated ranges (docs/ARCHITECTURE.md, "Predictor"): every number a
prediction rests on that is not a measured profile is an `Input` here, with the value used, the range it
is known to within, its unit and where it comes from (a document, a paper, a code path of the software
that ran, or a measurement with its command). Nothing is fitted to an expected output.

The predictor runs at the nominal values; an interval comes from running the same simulation on samples
of the inputs drawn inside their ranges (Latin hypercube, `samples`), and a sensitivity table from moving
one input at a time to either end of its range (`corners`).

    inputs = Inputs([Input("x", 2.0, 1.0, 3.0, "GB/s", "what it is", "where it comes from"), ...])
    inputs.nominal()["x"]                       # 2.0
    for values in inputs.samples(32, seed=0): ...
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from scipy.stats import qmc


@dataclass(frozen=True)
class Input:
    name: str
    """Identifier, with its unit in the name where it has one (`shm_edge_gbyte_s`)."""
    value: float
    """What the prediction uses."""
    low: float
    """Lower end of the range the value is known to within."""
    high: float
    """Upper end."""
    unit: str
    """Unit of value, low and high."""
    what: str
    """What it is, in one line."""
    source: str
    """Where the value and the range come from."""
    kind: str = "estimate"
    """How it is known: code (read in the software that ran), doc (its documentation or a paper),
    measured (here, with the command in `source`), typical (measurements on other hardware), estimate
    (reasoned, the reasoning in `source`)."""

    def __post_init__(self):
        if not self.source.strip() or not self.what.strip():
            raise ValueError(f"input {self.name}: every input says what it is and where it comes from")
        if not (self.low <= self.value <= self.high) or not all(map(math.isfinite, (self.low, self.high))):
            raise ValueError(f"input {self.name}: value {self.value} outside its range [{self.low}, {self.high}]")
        if self.kind not in KINDS:
            raise ValueError(f"input {self.name}: kind {self.kind!r} is not one of {', '.join(KINDS)}")

    @property
    def fixed(self) -> bool:
        return self.low == self.high

    def at(self, u: float) -> float:
        """The value at quantile u of the range (uniform; log-uniform when the range spans more than 2x)."""
        if self.fixed:
            return self.value
        if self.low > 0 and self.high / self.low > 2:
            return math.exp(math.log(self.low) + u * (math.log(self.high) - math.log(self.low)))
        return self.low + u * (self.high - self.low)


KINDS = ("code", "doc", "measured", "typical", "estimate")


class Inputs:
    """A named set of inputs."""

    def __init__(self, items: list[Input]):
        names = [i.name for i in items]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"inputs named twice: {', '.join(dupes)}")
        self.items = {i.name: i for i in items}

    def __getitem__(self, name: str) -> Input:
        return self.items[name]

    def __iter__(self):
        return iter(self.items.values())

    def nominal(self) -> dict[str, float]:
        return {n: i.value for n, i in self.items.items()}

    def uncertain(self) -> list[Input]:
        return [i for i in self if not i.fixed]

    def samples(self, n: int, seed: int = 0) -> list[dict[str, float]]:
        """n Latin-hypercube samples over the uncertain inputs (fixed ones at their value): each input's
        range cut into n strata, one draw per stratum, strata paired at random across inputs (scipy's
        `qmc.LatinHypercube` in unit coordinates, each mapped onto its input's range by `Input.at`)."""
        uncertain = self.uncertain()
        units = qmc.LatinHypercube(len(uncertain), rng=seed).random(n)
        base = self.nominal()
        return [{**base, **{i.name: i.at(float(u)) for i, u in zip(uncertain, row)}} for row in units]

    def corners(self) -> list[tuple[str, str, dict[str, float]]]:
        """(input, "low" | "high", values) for each uncertain input moved alone to either end."""
        base = self.nominal()
        return [(i.name, end, {**base, i.name: getattr(i, end)}) for i in self.uncertain() for end in ("low", "high")]

    def table(self) -> list[dict]:
        """One row per input, for the report."""
        return [
            {
                "input": i.name,
                "value": i.value,
                "low": i.low,
                "high": i.high,
                "unit": i.unit,
                "what": i.what,
                "kind": i.kind,
                "source": i.source,
            }
            for i in self
        ]
