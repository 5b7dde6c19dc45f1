"""Measuring the shortlist: each candidate until the 95% CI of its mean iteration time is within the
target (bounded), then the best two in alternated rounds when their CIs overlap.

Every try is an ordinary cell of an ordinary run directory, run through `run(candidate, iters, run_dir)`
(the command passes one over `ddlbench sweep`'s own function, so local, srun and testbed cells all run as
a sweep runs them), and a try already on disk is read back, not measured again: an interrupted advise
resumes where it stopped and takes the same decisions.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import pandas as pd

from harness.advise.candidates import Candidate
from harness.advise.decide import Estimate, Verdict, next_iters, paired_verdict, rel_half_width
from harness.results.store import load_run

Runner = Callable[[Candidate, int, Path], None]
"""run(candidate, iters, run_dir): measure that cell into run_dir (skipped when already there)."""


@dataclass(frozen=True)
class Policy:
    """How long to measure."""

    iters: int = 20
    """Measured iterations of a candidate's first try."""
    max_iters: int = 200
    """Bound on one try's iterations (the CI target is then given up, and said)."""
    target: float = 0.03
    """Half width of the 95% CI of the mean iteration time, relative to the mean."""
    rounds: int = 3
    """Alternated rounds of the best two when their CIs overlap (0 = none)."""


@dataclass
class Measured:
    """A candidate's measurement: every try's cell id, the last try's samples and summary row."""

    candidate: Candidate
    cell_ids: list[str] = field(default_factory=list)
    samples: list[float] = field(default_factory=list)
    row: dict = field(default_factory=dict)
    status: str = "ok"
    reason: str = ""

    @property
    def estimate(self) -> Estimate:
        return Estimate.of(self.samples)


def cell_row(run_dir: Path, c: Candidate, iters: int) -> tuple[dict | None, list[float]]:
    """The summary row of candidate `c` at `iters` in run_dir (None when absent) and its per-iteration
    times, each the slowest rank's (docs/ARCHITECTURE.md, "Timing loop")."""
    if not (run_dir / "summary.parquet").exists():
        return None, []
    tables = load_run(run_dir)
    s = tables.summary
    hit = s[(s["scheme"] == c.scheme) & (s["backend"] == c.backend) & (s["iters"] == iters)
            & (s["servers"].fillna(0).astype(int) == c.servers)]
    hit = hit[[json.loads(k) == json.loads(c.knobs_json) for k in hit["knobs_json"]]]
    if c.servers:
        hit = hit[hit["server_hosts"] == c.server_hosts]
    if hit.empty:
        return None, []
    row = hit.iloc[-1].to_dict()
    raw = tables.raw
    if raw.empty or row["status"] != "ok":
        return row, []
    mine = raw[raw["cell_id"] == row["cell_id"]]
    return row, mine.groupby("iteration")["iter_s"].max().sort_index().tolist()


def measure(c: Candidate, run: Runner, run_dir: Path, policy: Policy) -> Measured:
    """Measure candidate `c` until its CI is within the target or a try reaches max_iters."""
    out = Measured(c)
    iters = policy.iters
    while True:
        run(c, iters, run_dir)
        row, samples = cell_row(run_dir, c, iters)
        if row is None:
            out.status, out.reason = "failed", "the cell left no row (see the run directory's logs)"
            return out
        out.cell_ids.append(row["cell_id"])
        out.row, out.samples = row, samples
        if row["status"] != "ok":
            out.status, out.reason = "failed", str(row.get("reason", ""))
            return out
        nxt = next_iters(iters, rel_half_width(samples), policy.target, policy.max_iters)
        if nxt is None:
            return out
        iters = nxt


def alternated_rounds(a: Measured, b: Measured, run: Runner, rounds_dir: Path, rounds: int) -> Verdict:
    """Re-measure a and b's last tries back to back, `rounds` times (A B, then B A, ...: neither always
    goes first), each round into its own run directory; the first pass counts as one more pair."""
    a_means, b_means = [a.estimate.mean_s], [b.estimate.mean_s]
    for r in range(1, rounds + 1):
        d = rounds_dir / f"r{r}"
        order = (a, b) if r % 2 else (b, a)
        for m in order:
            run(m.candidate, int(m.row["iters"]), d)
        means = {}
        for m, key in ((a, "a"), (b, "b")):
            _, samples = cell_row(d, m.candidate, int(m.row["iters"]))
            if samples:
                means[key] = Estimate.of(samples).mean_s
        if len(means) == 2:
            a_means.append(means["a"])
            b_means.append(means["b"])
    return paired_verdict(a_means, b_means)


def frame(measured: list[Measured]) -> pd.DataFrame:
    """One row per measured candidate: label, status, tries, iterations, mean and 95% CI of the iteration
    time, its relative half width, and the last try's cell id."""
    rows = []
    for m in measured:
        e = m.estimate if m.samples else Estimate(float("nan"), float("nan"), float("nan"), 0)
        rows.append({"label": m.candidate.label, "status": m.status, "reason": m.reason, "tries": len(m.cell_ids),
                     "iters": int(m.row.get("iters", 0) or 0), "iter_s_mean": e.mean_s, "iter_s_ci95_low": e.low_s,
                     "iter_s_ci95_high": e.high_s, "rel_half_width": rel_half_width(m.samples) if m.samples else float("nan"),
                     "cell_id": m.cell_ids[-1] if m.cell_ids else ""})
    return pd.DataFrame(rows)
