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
    """Append the cells of each run (a stored baseline brings all its rounds), one batch per run; a run already
    in the history, or given twice, is not added again, also when another `history add` of it runs at the same
    time (they take turns: store.adding). Returns one line per run."""
    batches = [(tables.path, run_rows(tables, repo)) for run in runs for tables in load_rounds(resolve(run))]
    lines = []
    with store.adding(history) as history:
        known = store.known_runs(history)
        for path, rows in batches:
            fresh = rows[~rows["run_key"].isin(known)]
            if fresh.empty:
                lines.append(f"{path}: already in {history} (nothing added)")
                continue
            store.append(fresh, history)
            known |= set(fresh["run_key"])
            commit = fresh["commit"].iloc[0]
            where = (
                f"commit {commit[:12]}{' (dirty)' if fresh['commit_dirty'].iloc[0] else ''}" if commit else "no commit"
            )
            why = fresh["commit_reason"].iloc[0]
            lines.append(f"{path}: added {len(fresh)} cells to {history} ({where}{'; ' + why if why else ''})")
    return lines
