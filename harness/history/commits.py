"""Where a run's commit sits in the code's history: its sha, whether the tree was dirty, and its first-parent
depth (`git rev-list --first-parent --count SHA`: the commit's position on the first-parent chain, which does
not move when later commits land, so rows added months apart still sort). A run whose commit cannot be
placed (no commit recorded, not a git checkout, a shallow or detached CI clone without that commit) still
lands: depth -1 and the reason, and its series is ordered by time there.

    where = locate("4be1...-dirty", repo=".")     # Commit(sha="4be1...", dirty=True, depth=812, reason="")
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

DIRTY = "-dirty"
"""The suffix harness/results/environment.git_commit gives a commit whose tracked files were changed."""


@dataclass(frozen=True)
class Commit:
    sha: str
    """Full sha as the run recorded it ("" when it recorded none)."""
    dirty: bool
    """The run's checkout had uncommitted changes to tracked files."""
    depth: int
    """First-parent depth (commits on the first-parent chain up to and including it); -1 when unknown."""
    reason: str
    """Why the depth is unknown ("" when known)."""


def _git(repo: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, timeout=30)


def locate(recorded: str, repo: str | Path = ".") -> Commit:
    """Place the commit a run recorded (`git_commit` of its environment) in the history of `repo`."""
    recorded = str(recorded or "").strip()
    sha, dirty = recorded.removesuffix(DIRTY), recorded.endswith(DIRTY)
    if not sha:
        return Commit("", dirty, -1, "the run recorded no commit (it ran outside a git checkout)")
    try:
        out = _git(Path(repo), "rev-list", "--first-parent", "--count", sha)
    except (OSError, subprocess.SubprocessError) as e:
        return Commit(sha, dirty, -1, f"git could not be run ({e})")
    if out.returncode != 0:
        return Commit(
            sha,
            dirty,
            -1,
            f"commit {sha[:12]} is not in the history of {repo} (a shallow or detached clone?): ordered by time",
        )
    if _git(Path(repo), "rev-parse", "--is-shallow-repository").stdout.strip() == "true":
        return Commit(
            sha,
            dirty,
            -1,
            f"{repo} is a shallow clone, where depths are cut short: ordered by time "
            f"(clone with the full history, e.g. actions/checkout's fetch-depth: 0)",
        )
    return Commit(sha, dirty, int(out.stdout.strip()), "")


def bisect_command(first_bad: str, last_good: str) -> str:
    """The `git bisect` that narrows a change to one commit ("" when there is no range to narrow)."""
    if not first_bad or not last_good or first_bad == last_good:
        return ""
    return f"git bisect start {first_bad[:12]} {last_good[:12]}"
