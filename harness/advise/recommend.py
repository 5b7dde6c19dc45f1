"""The recommendation from the measurements (pure): the measured best, its gain over DDP with its default
knobs and the CI of that gain, and whether the top two are statistically tied."""

from __future__ import annotations

from dataclasses import dataclass

from harness.advise.budget import Outcome
from harness.advise.decide import Verdict, gain
from harness.advise.shortlist import Measured
from harness.core.errors import UserError


@dataclass(frozen=True)
class Recommendation:
    winner: Measured
    """The measured best (after the alternated rounds, when they ran)."""
    runner_up: Measured | None
    """The second best, or None when one candidate measured."""
    reference: Measured | None
    """DDP with its default knobs, when it measured."""
    gain: tuple[float, float, float] | None
    """(gain, low, high) of throughput over the reference: 0.12 = 12% faster; None without reference."""
    verdict: Verdict | None
    """The alternated rounds' verdict on the top two; None when their first CIs did not overlap (or no
    round fitted in the budget)."""
    budget: Outcome | None = None
    """What the budget allowed (None: no budget given, as in the tests of the pure parts)."""

    @property
    def tied(self) -> bool:
        return self.verdict is not None and self.verdict.tied

    def line(self) -> str:
        """One line a user reads first."""
        w = self.winner.candidate.label
        e = self.winner.estimate
        text = (
            f"recommended: {w} ({e.mean_s * 1000:.1f} ms per iteration, "
            f"95% CI {e.low_s * 1000:.1f}-{e.high_s * 1000:.1f})"
        )
        if self.gain is not None and not self.winner.candidate.is_reference:
            g, lo, hi = self.gain
            text += f"; {g * 100:+.1f}% throughput over DDP default (95% CI {lo * 100:+.1f}% to {hi * 100:+.1f}%)"
        elif self.winner.candidate.is_reference:
            text += "; DDP with its default knobs is itself the best measured"
        if self.tied:
            v = self.verdict
            text += (
                f"; statistically tied with {self.runner_up.candidate.label} over {v.rounds} paired measurements "
                f"(ratio {v.ratio:.3f}, 95% CI {v.low:.3f}-{v.high:.3f}): either will do"
            )
        elif self.verdict is None and self.budget is not None and self.budget.ended and self.runner_up is not None:
            g, lo, hi = gain(e, self.runner_up.estimate)
            if lo <= 0:  # the same delta-method interval as the gain over DDP: it holds no difference
                text += (
                    f"; tie at the budget: {w} and {self.runner_up.candidate.label} within their 95% CI "
                    f"({g * 100:+.1f}%, {lo * 100:+.1f}% to {hi * 100:+.1f}%; more time would tell them apart)"
                )
        if self.budget is not None:
            text += "; " + self.budget.line()
        return text


def ranked(measured: list[Measured]) -> list[Measured]:
    """The candidates that measured, fastest mean iteration first."""
    return sorted((m for m in measured if m.status == "ok" and m.samples), key=lambda m: m.estimate.mean_s)


def recommend(
    measured: list[Measured], verdict: Verdict | None = None, budget: Outcome | None = None
) -> Recommendation:
    """The recommendation; `verdict` is the alternated rounds' on ranked()[0] (a) and ranked()[1] (b)."""
    order = ranked(measured)
    if not order:
        raise UserError(
            "no candidate measured successfully: see the failed cells' reasons in the run directory "
            "(`ddlbench show RUN`)"
        )
    if verdict is not None and verdict.winner == 1:
        order[0], order[1] = order[1], order[0]
    ref = next((m for m in order if m.candidate.is_reference), None)
    g = gain(order[0].estimate, ref.estimate) if ref is not None else None
    return Recommendation(order[0], order[1] if len(order) > 1 else None, ref, g, verdict, budget)
