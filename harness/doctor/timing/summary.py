"""The GPU report's summary: one row per check, rewritten whole as each check starts or ends.

The GPU report's summary (README, "GPUs"): one row per check, written first as a skeleton and rewritten
whole, atomically, each time a check starts or ends, so a run killed from outside leaves every verdict it
reached. OUT/summary.json is the data; OUT/summary.md the same as one table a person reads. Several processes
update one summary in turn (scripts/gpu_report.sh's runner, then harness/doctor/timing/gpu_timing.py for its own
rows): each update reads the file, changes its rows and writes it back.

A row: `check` (its name), `part` (correctness | timing), `status` (pending | running | ok | FAILED |
undecided | NOT RUN | stopped), `verdict` (the status with its reason, as printed: `undecided: host-bound,
host pace varied 28%`, `NOT RUN: no time left (needs about 60 s)`), `figure` (the number it rests on),
`reason` (why, in a sentence), `seconds` (what it took), `estimate_s` (what the plan expected).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from harness.core.atomic import write_json_atomic, write_text_atomic

FILES = ("summary.md", "summary.json", "details.tar.gz")
"""Everything a report's OUT holds."""
DONE = ("ok", "FAILED", "undecided", "NOT RUN", "stopped")
"""Statuses of a check that has ended (pending and running have not)."""


def no_time(needs_s: float) -> dict:
    """The row fields of a check that does not fit the time left."""
    return {
        "status": "NOT RUN",
        "verdict": f"NOT RUN: no time left (needs about {needs_s:.0f} s)",
        "reason": "the budget's time left was shorter than the check's estimate",
    }


class Summary:
    """OUT/summary.json and OUT/summary.md: `plan` writes the skeleton, `update` one row (both files again)."""

    def __init__(self, out: Path):
        self.out = Path(out)
        self.json = self.out / "summary.json"

    def load(self) -> dict:
        return json.loads(self.json.read_text()) if self.json.exists() else {"checks": []}

    def plan(self, head: dict, checks: list[dict]) -> None:
        """The skeleton: the run's facts and every planned check, pending, with its estimate."""
        rows = [
            {
                "check": c["check"],
                "part": c["part"],
                "status": "pending",
                "verdict": "pending",
                "figure": "",
                "reason": c.get("reason", ""),
                "seconds": None,
                "estimate_s": c.get("estimate_s"),
            }
            for c in checks
        ]
        self._write({**head, "started_unix": time.time(), "complete": False, "checks": rows})

    def add(self, checks: list[dict]) -> None:
        """Rows a later stage plans (pending), after the others; a row already there is kept."""
        doc = self.load()
        names = {r["check"] for r in doc["checks"]}
        for c in checks:
            if c["check"] not in names:
                doc["checks"].append(
                    {
                        "check": c["check"],
                        "part": c["part"],
                        "status": "pending",
                        "verdict": "pending",
                        "figure": "",
                        "reason": c.get("reason", ""),
                        "seconds": None,
                        "estimate_s": c.get("estimate_s"),
                    }
                )
        self._write(doc)

    def update(self, check: str, **fields) -> None:
        """Set fields of one row (added at the end when the plan did not have it); `verdict` defaults to the
        status."""
        doc = self.load()
        row = next((r for r in doc["checks"] if r["check"] == check), None)
        if row is None:
            row = {
                "check": check,
                "part": fields.get("part", ""),
                "status": "pending",
                "verdict": "pending",
                "figure": "",
                "reason": "",
                "seconds": None,
                "estimate_s": None,
            }
            doc["checks"].append(row)
        if "status" in fields and "verdict" not in fields:
            fields["verdict"] = fields["status"]
        if fields.get("status") == "running":
            if row["status"] == "running":  # a later stage of the same check: it keeps its start and estimate
                fields.pop("estimate_s", None)
            else:
                fields["started_unix"] = time.time()
        elif fields.get("status") in DONE and row.get("started_unix") and "seconds" not in fields:
            fields["seconds"] = round(time.time() - row["started_unix"], 1)  # from its start to its verdict
        row.update(fields)
        self._write(doc)

    def pending(self) -> list[dict]:
        return [r for r in self.load()["checks"] if r["status"] not in DONE]

    def finish(self, **head) -> dict:
        doc = self.load()
        doc.update(head, complete=True)
        self._write(doc)
        return doc

    def _write(self, doc: dict) -> None:
        doc["elapsed_s"] = round(time.time() - doc.get("started_unix", time.time()), 1)
        write_json_atomic(self.json, doc, indent=1)
        write_text_atomic(self.out / "summary.md", markdown(doc))


def markdown(doc: dict) -> str:
    """One table a person reads: every check, its verdict, its figure, its reason. Pure."""
    state = "complete" if doc.get("complete") else "in progress (or stopped from outside: rows still pending never ran)"
    budget = doc.get("budget_s")
    head = [
        doc.get("machine", ""),
        f"budget {budget:.0f} s" if isinstance(budget, (int, float)) else "",
        f"{doc.get('elapsed_s', 0):.0f} s used",
        state,
    ]
    lines = [f"# {doc.get('title', 'GPU report')}", "", "; ".join(h for h in head if h) + ".", ""]
    if doc.get("command"):
        lines += [f"`{doc['command']}`", ""]
    lines += ["| part | check | verdict | figure | reason | s (estimate) |", "|---|---|---|---|---|---|"]
    for r in doc["checks"]:
        took = "" if r.get("seconds") is None else f"{r['seconds']:.0f}"
        est = "" if r.get("estimate_s") is None else f" ({r['estimate_s']:.0f})"
        cells = [
            r.get("part", ""),
            r["check"],
            f"**{r['verdict']}**" if r["status"] == "FAILED" else r["verdict"],
            r.get("figure", ""),
            r.get("reason", ""),
            took + est,
        ]
        lines.append("| " + " | ".join(str(c).replace("|", "/").replace("\n", " ") for c in cells) + " |")
    counts = {
        s: sum(r["status"] == s for r in doc["checks"])
        for s in ("ok", "FAILED", "undecided", "NOT RUN", "stopped", "pending", "running")
    }
    lines += ["", ", ".join(f"{n} {s}" for s, n in counts.items() if n) + "."]
    if doc.get("notes"):
        lines += [""] + [f"- {n}" for n in doc["notes"]]
    return "\n".join(lines) + "\n"
