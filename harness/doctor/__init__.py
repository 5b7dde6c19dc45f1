"""`ddlbench doctor`: what this machine offers, then one tiny cell per usable backend x scheme; and the GPU
module (docs/ARCHITECTURE.md, "The GPU module").

    ddlbench doctor --quick          # facts, then one smoke cell per backend (under a minute on 2 cores)
    ddlbench doctor --no-cells       # facts only
    ddlbench doctor --json           # the same as one JSON document
    bash scripts/gpu_report.sh OUT   # the GPU module within 420 s: OUT/summary.md, summary.json, details.tar.gz

diagnose.py is one visit (the click command is it behind options); facts.py and network.py collect,
tolerant of missing tools; smoke.py plans the cells and runs them through execute.run_cells;
gpu_checks.py names what only a GPU can check; render.py turns it all into text. The GPU module:
gpu_report.py runs its checks within a budget (budget.py) into a summary (summary.py); gpu_timing.py is its
timing check (timing_run.py its state, rounds.py what it times, verdicts.py its verdicts, paired.py and
cpu_pairs.py alternated pairs, bare_loop.py the reference loop, host_state.py the machine around it);
checkout_pairs.py times one cell from two checkouts in pairs.
"""
