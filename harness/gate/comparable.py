"""Which environments the regression gate may compare (docs/ARCHITECTURE.md, "Regression gate").

    check_environments(base.environment, cur.environment, backends={"torch"})   # note, or UserError

A cell's numbers depend on the machine (CPU, devices, GPU driver and topology, host count), Python,
torch/CUDA/NCCL, and its own backend's library: a torch cell does not care which Horovod is installed.
The values are compared, not a stored hash, so baselines recorded before this rule still compare.
"""

from __future__ import annotations

import pandas as pd

from harness.core.errors import UserError
from harness.results.fingerprints import COMMON_KEYS, fingerprint_keys, fingerprint_value


def environment_differences(base: pd.DataFrame, current: pd.DataFrame, backends=()) -> list[str]:
    """`name: old -> new` for every key that can change the numbers of a cell of these backends
    (harness/results/fingerprints.fingerprint_keys; docs/ARCHITECTURE.md, "Regression gate"); an absent
    value is named `missing`. Several rows per side (merged runs) compare as their sets of values."""
    keys = list(COMMON_KEYS)
    for b in sorted(backends):
        keys += [k for k in fingerprint_keys(b) if k not in keys]

    def values(environment: pd.DataFrame, k: str) -> str:
        vals = sorted({fingerprint_value(r, k) for _, r in environment.iterrows()})
        return "/".join(v or "missing" for v in vals) or "missing"

    return [f"{k}: {values(base, k)} -> {values(current, k)}" for k in keys if values(base, k) != values(current, k)]


def check_environments(base: pd.DataFrame, current: pd.DataFrame, backends=(), allow_mismatch: bool = False) -> str:
    """Refuse (UserError) to compare runs whose environments differ in what can change the compared
    cells' numbers (common keys and the compared backends' own libraries), unless allowed; returns a note."""
    for side, environment in (("baseline", base), ("current run", current)):
        if environment is None or environment.empty:
            if allow_mismatch:
                return f"no environment table in the {side}; compared anyway (--allow-env-mismatch)"
            raise UserError(
                f"refusing to compare: the {side} has no environment.parquet, so its machine is "
                f"unknown; re-run it, or pass --allow-env-mismatch"
            )
    diff = environment_differences(base, current, backends)
    libs = ", ".join(sorted(b for b in backends if fingerprint_keys(b) != COMMON_KEYS))
    what = "machine, python, torch" + (f" and {libs}" if libs else "")
    if not diff:
        return f"environments match ({what})"
    if allow_mismatch:
        return f"environments differ ({'; '.join(diff)}); compared anyway (--allow-env-mismatch)"
    raise UserError(
        f"refusing to compare unlike environments ({'; '.join(diff)}); record a baseline on this "
        f"machine kind (`ddlbench baseline save`) or pass --allow-env-mismatch"
    )
