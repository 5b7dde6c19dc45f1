"""One GPU timing run's state: options, budget, summary, and the stages that fit the time left.

One GPU timing run's state (harness/doctor/timing/gpu_timing.py): its options, its budget and estimates
(harness/doctor/timing/budget.py), the summary it records its checks in (harness/doctor/timing/summary.py), the
seconds of each part (harness/doctor/timing/host_state.py), and `stage`: run one stage if it fits the time left,
recording its rows as not run or failed otherwise."""

from __future__ import annotations

from harness.doctor.timing import budget as B
from harness.doctor.timing.host_state import Parts
from harness.doctor.timing.paired import PAIRS
from harness.doctor.timing.summary import Summary, no_time

STUDY = ("resnet50", "bert-base", "bert-large", "gpt2-small")
"""The real workloads at their registered (the study's) batch and sequence length."""
PROFILED = ("resnet50", "bert-base", "bert-large")
"""The study's table is predicted from these three profiles."""
PROFILE_TOLERANCE = 0.15
"""A profile's iteration (forward + backward + optimizer) against the bare loop's."""
PROFILE_ITERS, PROFILE_WARMUP = 10, 3


def case_name(case) -> str:
    return f"harness/bare {case[0]} {case[1]}"


class Run:
    """One timing run: its options, budget, summary, the parts' seconds and what the stages measured."""

    def __init__(self, a):
        self.a, self.out = a, a.out
        self.cases = [(wl, d) for wl in a.workloads for d in a.dtypes]
        self.budget = B.Budget.of(a.budget_s) if a.budget_s else B.Budget(float("inf"), 0.0)
        self.summary = Summary(a.summary or a.out)
        self.parts = Parts()
        self.measured: dict = {}  # (workload, dtype) -> this machine's bare iteration, after round A
        self.failed = False
        self.notes: dict = {}  # check -> what it could not do (a stage that did not fit), for its reason
        self.profiled = [wl for wl in PROFILED if wl in a.workloads] or a.workloads[:1]

    def plan(self) -> list[dict]:
        each = (self.rounds_s() + (self.pairs_s(self.cases) if self.a.device == "cpu" else 0)) / len(self.cases)
        rows = [
            {
                "check": case_name(c),
                "part": "timing",
                "estimate_s": round(each),
                "reason": "the harness's local cell against the bare loop before and after it",
            }
            for c in self.cases
        ]
        rows += [{"check": "kernels per iteration", "part": "timing", "estimate_s": B.ESTIMATE_S["kernels"]}]
        rows += [{"check": f"profile {wl}", "part": "timing", "estimate_s": self.profile_s(wl)} for wl in self.profiled]
        if set(self.profiled) == set(PROFILED):
            rows += [
                {"check": "study table from the profiles", "part": "timing", "estimate_s": B.ESTIMATE_S["prediction"]}
            ]
        rows += [
            {"check": "variants", "part": "timing", "estimate_s": None, "reason": "only where a case fails or drifts"}
        ]
        return rows

    # --- estimates (harness/doctor/timing/budget.py) -------------------------------------------------------------
    def rounds_s(self) -> float:
        n = self.a.warmup + self.a.iters
        return (
            2 * B.loop_s(self.cases, n, self.measured)
            + len(self.cases) * B.CELL_OVERHEAD_S
            + B.loop_s(self.cases, n, self.measured)
        )

    def profile_s(self, wl: str) -> float:
        """Two passes of the profile (the loop's totals, the hooks' shares) and a bare loop either side."""
        return B.PROFILE_OVERHEAD_S + 4 * (PROFILE_ITERS + PROFILE_WARMUP) * B.iter_s((wl, "fp32"), self.measured)

    def pairs_s(self, cases: list) -> float:
        if self.a.device == "cpu":
            per = 2 * self.a.pairs * B.PROCESS_START_S
            return len(cases) * per + B.loop_s(cases, 2 * self.a.pairs * (self.a.warmup + self.a.iters), self.measured)
        return B.loop_s(cases, 2 * PAIRS * (self.pair_warmup() + self.pair_iters()), self.measured)

    def pair_warmup(self) -> int:
        return min(self.a.warmup, 2)

    def pair_iters(self) -> int:
        return max(3, self.a.iters // 3)

    # --- recording ----------------------------------------------------------------------------------------
    def skip(self, names: list[str], needs_s: float, stage: str) -> None:
        for n in names:
            self.summary.update(n, **no_time(needs_s))
            self.notes[n] = f"{stage} NOT RUN: no time left (needs about {needs_s:.0f} s)"

    def fail(self, names: list[str], what: str, e: BaseException) -> None:
        self.failed = True
        last = (str(e).strip().splitlines() or [type(e).__name__])[-1][:300]
        for n in names:
            self.summary.update(n, status="FAILED", verdict=f"FAILED: {what} failed", reason=last)

    def stage(self, name: str, rows: list[str], estimate_s: float, fn, *args, running: bool = True):
        """Run one stage if it fits the time left; (ok, its result). Its rows are marked running while it runs
        (`running`), and recorded as not run or failed when it does not fit or fails."""
        if not self.budget.fits(estimate_s):
            self.skip(rows, estimate_s, name)
            return False, None
        for n in rows if running else ():
            self.summary.update(n, status="running", estimate_s=round(estimate_s))
        try:
            return True, self.parts.run(name, fn, *args, state=True)
        except Exception as e:  # a stage's failure is a verdict, and the later stages still run
            self.fail(rows, name, e)
            return False, None
