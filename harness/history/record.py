"""Adding runs to a history folder: `ddlbench history add RUN... --history DIR`, and `--history DIR` on `sweep`,
`run` and `slurm collect` after their run.

    lines = add_runs("history/", ["results/<run-id>"])     # one line per run: what was added, or why not
"""

from __future__ import annotations

from pathlib import Path

from harness.gate.baselines import load_rounds, resolve
from harness.history import store
from harness.history.rows import run_rows


def add_runs(history: str | Path, runs, repo: str | Path = ".") -> list[str]:
    """Append the cells of each run (a stored baseline brings all its rounds) as one batch; a run already in
    the history is not added again. Returns one line per run."""
    history = store.check_history(history, must_exist=False)
    known = store.known_runs(history)
    lines = []
    for run in runs:
        for tables in load_rounds(resolve(run)):
            rows = run_rows(tables, repo)
            fresh = rows[~rows["run_key"].isin(known)]
            if fresh.empty:
                lines.append(f"{tables.path}: already in {history} (nothing added)")
                continue
            store.append(fresh, history)
            known |= set(fresh["run_key"])
            commit = fresh["commit"].iloc[0]
            where = (f"commit {commit[:12]}{' (dirty)' if fresh['commit_dirty'].iloc[0] else ''}"
                     if commit else "no commit")
            why = fresh["commit_reason"].iloc[0]
            lines.append(f"{tables.path}: added {len(fresh)} cells to {history} ({where}"
                         f"{'; ' + why if why else ''})")
    return lines
