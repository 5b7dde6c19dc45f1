"""Triage shared in the repository: `annotations.yaml` in the history folder, versioned with it.

    version: 1
    changes:
    - series: 3f9a0c1b2d4e        # from `ddlbench history changes`
      commit: 4be1c0ffee12        # the change's first bad commit (a prefix of 7 or more), or
      # run: nightly-17@2026-...  # its first bad run (run_key) where the commit is unknown
      state: expected             # or acknowledged
      reason: bf16 by default since this commit

`acknowledged`: seen, being handled; no longer open, and `compare --fail-on confirmed` lets it pass.
`expected`: the code meant it; no longer open, and the series' reference level starts again at it
(detect.stable_start), so `compare --history` judges later runs against the new level at once.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml

from harness.core.errors import UserError

FILE = "annotations.yaml"
VERSION = 1
STATES = ("acknowledged", "expected")


@dataclass(frozen=True)
class Annotation:
    series: str
    commit: str
    run: str
    state: str
    reason: str

    def matches(self, series: str, commit: str, run_key: str) -> bool:
        if series != self.series:
            return False
        if self.commit:
            return bool(commit) and commit.startswith(self.commit)
        return run_key == self.run


def _entry(i: int, e, path: Path) -> Annotation:
    where = f"{path}: entry {i + 1}"
    if not isinstance(e, dict):
        raise UserError(f"{where} is not a mapping: write `- series: ... commit: ... state: ... reason: ...`")
    unknown = sorted(set(e) - {"series", "commit", "run", "state", "reason"})
    if unknown:
        raise UserError(f"{where} has unknown keys {unknown}: use series, commit (or run), state, reason")
    state, commit = str(e.get("state") or ""), str(e.get("commit") or "")
    if state not in STATES:
        raise UserError(f"{where}: state {state!r} is not one of {', '.join(STATES)}; fix the file")
    if not e.get("series") or not (commit or e.get("run")):
        raise UserError(f"{where} needs a series and a commit (or run), as `ddlbench history changes` lists them")
    if commit and len(commit) < 7:
        raise UserError(f"{where}: commit {commit!r} is too short to be unambiguous; give 7 or more characters")
    if not str(e.get("reason") or "").strip():
        raise UserError(f"{where} has no reason: say why the change is {state}")
    return Annotation(str(e["series"]), commit, str(e.get("run") or ""), state, str(e["reason"]).strip())


def load(history: str | Path) -> list[Annotation]:
    """The annotations of a history folder ([] without the file); a malformed file is a UserError."""
    path = Path(history) / FILE
    if not path.exists():
        return []
    try:
        doc = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as e:
        raise UserError(f"{path} is not valid YAML ({str(e).splitlines()[0]}); fix the file") from None
    if not isinstance(doc, dict) or doc.get("version") != VERSION:
        raise UserError(f"{path} must be a mapping with `version: {VERSION}` and `changes:`; fix the file")
    return [_entry(i, e, path) for i, e in enumerate(doc.get("changes") or [])]


def state_of(notes: list[Annotation], series: str, commit: str, run_key: str) -> tuple[str, str]:
    """(state, reason) of one change: `open` and "" when no annotation names it."""
    for a in notes:
        if a.matches(series, commit, run_key):
            return a.state, a.reason
    return "open", ""
