"""Every rank's trace (Tracer.export()) merged into one Chrome trace JSON (docs/ARCHITECTURE.md, "Traces"):
pid = rank, one thread per lane (compute, wait, and as many communication lanes as operations overlap),
"X" complete events in microseconds since the clock reference. Opens in Perfetto (ui.perfetto.dev) and
chrome://tracing.
"""

from __future__ import annotations

from harness.measure.trace_transport import END_MEANING

TID = {"compute": 1, "wait": 2}
COMM_TID = 10
"""Communication lanes are tids 10, 11, ...: operations in flight together go to separate lanes."""

CLOCK_NOTE = (
    "times are microseconds since each rank read its clock right after the barrier that opens "
    "the measurement; ranks leave that barrier within its exit skew (microseconds on one box, "
    "about one network latency across hosts), so cross-rank alignment is that good, no better"
)
NOT_COVERED = (
    "not traced: communication inside frameworks that do not go through the harness's transport "
    "(Horovod's DistributedOptimizer, DeepSpeed's engine and ZeRO, BytePS's core, DDP's buffer "
    "broadcast); their time shows only in the loop's phases (forward, backward, comm_wait, "
    "optimizer). DDP buckets are traced through a comm hook running torch's allreduce_hook, "
    "which replaces DDP's built-in all-reduce while the cell is traced"
)


def _us(t: float) -> float:
    return round(t * 1e6, 3)


def _x(pid: int, tid: int, name: str, t0: float, t1: float, cat: str, args: dict) -> dict:
    return {
        "ph": "X",
        "pid": pid,
        "tid": tid,
        "name": name,
        "cat": cat,
        "ts": _us(t0),
        "dur": max(0.0, _us(t1) - _us(t0)),
        "args": args,
    }


def _lane_events(rank: int, data: dict) -> list[dict]:
    out = []
    starts = data["iteration_starts_s"]
    for i in range(len(starts) - 1):
        out.append(_x(rank, TID["compute"], f"iteration {i}", starts[i], starts[i + 1], "iteration", {"iteration": i}))
    for lane, name, t0, t1, args in data["events"]:
        cat = "phase" if args.get("phase") else ("layer" if lane == "compute" and "layer" in args else lane)
        out.append(_x(rank, TID[lane], name, t0, t1, cat, args))
    return out


def _comm_events(rank: int, comms: list[dict]) -> tuple[list[dict], int, int]:
    """Communication events packed into lanes (first lane free at the operation's start)."""
    out, lane_end, unfinished = [], [], 0
    for c in sorted(comms, key=lambda c: c["start"]):
        if c["end"] is None:
            unfinished += 1
            continue
        lane = next((k for k, e in enumerate(lane_end) if e <= c["start"]), len(lane_end))
        if lane == len(lane_end):
            lane_end.append(c["end"])
        lane_end[lane] = c["end"]
        args = {k: c[k] for k in ("op", "key", "bytes", "tensors", "iteration", "thread", "end_source")}
        for k in ("issued", "sent"):
            if c[k] is not None:
                args[f"{k}_us"] = _us(c[k])
        out.append(_x(rank, COMM_TID + lane, f"{c['op']} {c['key']}", c["start"], c["end"], "comm", args))
    return out, len(lane_end), unfinished


def chrome_trace(cell_id: str, ranks: list[dict], iters: int) -> dict:
    """The merged trace of one cell from each rank's export (ordered by rank)."""
    events: list[dict] = []
    meta_ranks = {}
    for data in ranks:
        r = data["rank"]
        comm, lanes, unfinished = _comm_events(r, data["comms"])
        events.append({"ph": "M", "pid": r, "name": "process_name", "args": {"name": f"rank {r}"}})
        events.append({"ph": "M", "pid": r, "name": "process_sort_index", "args": {"sort_index": r}})
        names = {**{v: k for k, v in TID.items()}, **{COMM_TID + k: f"comm {k + 1}" for k in range(lanes)}}
        for tid, name in names.items():
            events.append({"ph": "M", "pid": r, "tid": tid, "name": "thread_name", "args": {"name": name}})
            events.append({"ph": "M", "pid": r, "tid": tid, "name": "thread_sort_index", "args": {"sort_index": tid}})
        events += _lane_events(r, data) + comm
        meta_ranks[str(r)] = {
            "comm_ops": len(data["comms"]),
            "unfinished_comm_ops": unfinished,
            "sources": data["sources"],
            "traced_iterations": max(0, len(data["iteration_starts_s"]) - 1),
        }
    xs = [e for e in events if e["ph"] == "X"]
    xs.sort(key=lambda e: (e["pid"], e["tid"], e["ts"], -e["dur"]))
    return {
        "traceEvents": [e for e in events if e["ph"] == "M"] + xs,
        "displayTimeUnit": "ms",
        "otherData": {
            "cell_id": cell_id,
            "trace_iters": iters,
            "clock": CLOCK_NOTE,
            "end": END_MEANING,
            "not_covered": NOT_COVERED,
            "layers": "fwd: a module owning parameters, pre-hook to forward hook; bwd: from the "
            "module's output gradient node starting to the next layer's (parameter-"
            "free modules in between are charged to it)",
            "ranks": meta_ranks,
        },
    }
