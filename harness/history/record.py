"""Adding runs to a history folder: `ddlbench history add RUN... --history DIR`, and `--history DIR` on `sweep`,
`run` and `slurm collect` after their run.

    lines = add_runs("history/", ["results/<run-id>"])     # one line per run: what was added, or why not
"""

from __future__ import annotations

from pathlib import Path

from harness.core.errors import UserError
from harness.gate.baselines import load_rounds, resolve
from harness.history import store
from harness.history.rows import run_rows


def add_runs(history: str | Path, runs, repo: str | Path = ".") -> list[str]:
    """Append the cells of each run (a stored baseline brings all its rounds), one batch per run; a run already
    in the history, or given twice, is not added again, also when another `history add` of it runs at the same
    time (they take turns: store.adding). All or nothing: a batch that cannot be written (a full disk, a folder
    made read-only) takes back the batches this call wrote before it, so that the folder is as it was and the
    same command, run again once the fault is gone, adds every run. Returns one line per run."""
    batches = [(tables.path, run_rows(tables, repo)) for run in runs for tables in load_rounds(resolve(run))]
    lines, written = [], []
    with store.adding(history) as history:
        known = store.known_runs(history)
        for path, rows in batches:
            fresh = rows[~rows["run_key"].isin(known)]
            if fresh.empty:
                lines.append(f"{path}: already in {history} (nothing added)")
                continue
            try:
                written.append(store.append(fresh, history))
            except BaseException as e:  # an interruption too: the folder gets every run given or none
                for done in written:
                    done.unlink(missing_ok=True)
                if isinstance(e, UserError):
                    raise UserError(f"nothing added to {history} (it is as it was): {path}: {e}") from None
                raise
            known |= set(fresh["run_key"])
            commit = fresh["commit"].iloc[0]
            where = (
                f"commit {commit[:12]}{' (dirty)' if fresh['commit_dirty'].iloc[0] else ''}" if commit else "no commit"
            )
            why = fresh["commit_reason"].iloc[0]
            lines.append(f"{path}: added {len(fresh)} cells to {history} ({where}{'; ' + why if why else ''})")
    return lines
