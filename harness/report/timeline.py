"""Timeline figures of traced cells (docs/ARCHITECTURE.md, "Traces"): the slowest rank's traced
iterations in three lanes, compute (each layer's forward and backward, optimizer steps), communication
(every operation from start to end, one row per operation in flight together) and waits.

    traces = find_traces(runs, ["bert-base-tiny.wfbp-a2a.torch.w2.bdcbe6a0"])   # [] chosen: all, capped
    fig = timeline(json.loads(path.read_text()))
    section(page, runs, chosen, save)                                           # used by render.py

Reads the cells' trace.json files; draws nothing else and writes nothing (render.py saves).
"""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # no display: the report is files (must precede pyplot)
import matplotlib.pyplot as plt
from matplotlib.patches import Patch

from harness.core.errors import UserError

MAX_AUTO = 4
"""Timelines drawn when no cell is chosen (the first traced cells in id order)."""
COLORS = {
    "fwd": "#4c78a8",
    "bwd": "#72b7b2",
    "optimizer": "#b279a2",
    "comm": "#f58518",
    "wait": "#e45756",
    "pre-hook": "#9d2f2f",
    "phase": "#e8e8e8",
}
CAPTION = (
    "Timeline of the slowest rank (the one whose traced iterations took longest) over the traced "
    "iterations: compute lane (grey: the loop's phases; blue: each layer's forward, teal: its "
    "backward, purple: optimizer steps), communication lane (one bar per operation from its start to "
    "the earliest completion seen, stacked when in flight together), waits (red: the loop's comm "
    "wait and handle waits; dark red: waits in forward pre-hooks). Dashed lines: iteration starts. "
    "Open the cell's trace.json in Perfetto for every rank and each event's bytes and tensors."
)


def find_traces(runs: list, chosen: list[str]) -> list[tuple[str, Path]]:
    """(cell id, trace.json) of the chosen cells, of every traced cell (at most MAX_AUTO) when none is
    chosen, or of all of them for ["all"]; UserError naming the traced cells when a chosen one has no
    trace."""
    found: dict[str, Path] = {}
    for r in runs:
        root = Path(getattr(r, "path", ""))
        if root.is_dir():
            for p in sorted((root / "cells").glob("*/trace.json")):
                found.setdefault(p.parent.name, p)
    if not chosen:
        return sorted(found.items())[:MAX_AUTO]
    if list(chosen) == ["all"]:
        return sorted(found.items())
    missing = [c for c in chosen if c not in found]
    if missing:
        have = ", ".join(sorted(found)) or "none (run cells with `ddlbench run --trace` or `sweep --trace`)"
        raise UserError(f"--timeline {missing[0]}: no trace.json for that cell in these runs; traced cells: {have}")
    return [(c, found[c]) for c in dict.fromkeys(chosen)]


def read_trace(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise UserError(f"cannot read trace {path}: {e}; run the cell again with --trace") from None


def slowest_rank(trace: dict) -> int:
    spans: dict[int, float] = {}
    for e in trace["traceEvents"]:
        if e.get("cat") == "iteration":
            spans[e["pid"]] = spans.get(e["pid"], 0.0) + e["dur"]
    if not spans:
        raise UserError(
            f"trace of {trace.get('otherData', {}).get('cell_id', '?')} has no traced iteration "
            f"(the cell ran fewer iterations than it warmed up?); run it again with --trace"
        )
    return max(spans, key=lambda r: (spans[r], -r))


def _kind(e: dict) -> str | None:
    cat, name = e.get("cat"), e["name"]
    if cat == "comm":
        return "comm"
    if cat == "wait":
        return "pre-hook" if name.startswith("pre-hook") else "wait"
    if cat == "phase":
        return "wait" if name == "comm_wait" else "phase"
    if cat == "layer":
        return "fwd" if name.startswith("fwd ") else ("bwd" if name.startswith("bwd ") else "wait")
    if name == "optimizer.step":
        return "optimizer"
    return None


def timeline(trace: dict, rank: int | None = None):  # noqa: C901 - one figure, one branch per kind of event
    """The figure of one cell's trace (the slowest rank unless `rank` is given)."""
    rank = slowest_rank(trace) if rank is None else rank
    mine = [e for e in trace["traceEvents"] if e.get("ph") == "X" and e["pid"] == rank]
    comm_rows = sorted({e["tid"] for e in mine if e.get("cat") == "comm"})
    fig, ax = plt.subplots(figsize=(12, 3.6))
    bars: dict[tuple, list] = {}
    for e in mine:
        kind = _kind(e)
        if kind is None:
            continue
        x, w = e["ts"] / 1e3, max(e["dur"] / 1e3, 1e-6)
        if kind == "comm":
            n = max(1, len(comm_rows))
            h = 0.8 / n
            y = 1.1 + comm_rows.index(e["tid"]) * h
        elif kind in ("wait", "pre-hook"):
            y, h = 0.1, 0.8
        elif kind == "phase":
            y, h = 2.1, 0.8
        else:
            y, h = 2.25, 0.5
        bars.setdefault((kind, y, h), []).append((x, w))
    for kind in ("phase", "fwd", "bwd", "optimizer", "comm", "wait", "pre-hook"):
        for (k, y, h), xs in bars.items():
            if k == kind:
                ax.broken_barh(xs, (y, h), facecolors=COLORS[k], edgecolor="none")
    for e in mine:
        if e.get("cat") == "iteration":
            ax.axvline(e["ts"] / 1e3, color="black", linestyle="--", linewidth=0.7)
    ax.set_yticks([0.5, 1.5, 2.5], ["waits", f"comm ({len(comm_rows)} rows)", "compute"])
    ax.set_ylim(0, 3)
    ax.set_xlabel("ms since the barrier that opens the measurement")
    meta = trace.get("otherData", {})
    traced = meta.get("ranks", {}).get(str(rank), {}).get("traced_iterations", "?")
    ax.set_title(f"{meta.get('cell_id', '')}: rank {rank}, {traced} traced iteration(s)", fontsize=10)
    handles = [
        Patch(color=COLORS[k], label=lbl)
        for k, lbl in (
            ("phase", "loop phase"),
            ("fwd", "layer forward"),
            ("bwd", "layer backward"),
            ("optimizer", "optimizer step"),
            ("comm", "communication"),
            ("wait", "wait"),
            ("pre-hook", "wait in forward pre-hook"),
        )
    ]
    ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.22), ncol=7, fontsize=8, frameon=False)
    fig.tight_layout()
    return fig


def section(page, runs: list, chosen: list[str], save) -> list[str]:
    """Add a "Timelines" section with one figure per traced cell (chosen, or all up to MAX_AUTO); returns
    the PNG names. Nothing is added when no cell was traced and none was chosen."""
    traces = find_traces(runs, chosen)
    if not traces:
        return []
    page.h("Timelines")
    files = []
    for i, (cell_id, path) in enumerate(traces):
        file = f"timeline-{i + 1}.png"
        save(timeline(read_trace(path)), file)
        page.img(file, f"{cell_id}. {CAPTION}")
        files.append(file)
    return files
