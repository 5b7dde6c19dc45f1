"""`ddlbench doctor`: what this machine offers, then one tiny cell per usable backend x scheme.

    ddlbench doctor --quick          # facts, then one smoke cell per backend (under a minute on 2 cores)
    ddlbench doctor --no-cells       # facts only
    ddlbench doctor --json           # the same as one JSON document

diagnose.py is one visit (the click command is it behind options); facts.py and network.py collect,
tolerant of missing tools; smoke.py plans the cells and runs them through execute.run_cells;
gpu_checks.py names what only a GPU can check, gpu_probe.py runs the few the doctor makes itself; render.py
turns it all into text. The GPU module (its runner and timing check) is a room of its own,
harness/doctor/timing/ (docs/ARCHITECTURE.md, "The GPU module").
"""
