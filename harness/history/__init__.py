"""Every cell's history across commits (docs/ARCHITECTURE.md, "History"): an append-only store of one row per
cell and run (`store.py`, rows made by `rows.py` with the environment's `fingerprint.py` and the run's
`commits.py`), change points found and confirmed per cell and environment (`detect.py`, its penalty from a
simulated null in `null.py`, the whole store searched with a cache in `scan.py`), triage in `annotations.py`,
the gate against each cell's latest stable segment (`against.py`) and the false-alarm benchmark
(`alarms.py`).

    ddlbench history add results/<run-id> --history history/
    ddlbench history changes --history history/
    ddlbench compare --history history/ results/<new-run-id>
"""
