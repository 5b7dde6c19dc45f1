"""The GPU module: one lease of a GPU machine in one command, and its timing check (README, "GPUs").

    bash scripts/gpu_report.sh OUT   # the GPU module within 420 s: OUT/summary.md, summary.json, details.tar.gz

gpu_report.py runs its checks within a budget (budget.py) into a summary (summary.py); gpu_timing.py is its
timing check, the harness against a bare loop (timing_run.py its state, rounds.py what it times, verdicts.py
its verdicts, paired.py and cpu_pairs.py alternated pairs, bare_loop.py the reference loop, host_state.py the
machine around it); checkout_pairs.py times one cell from two checkouts in pairs. Nothing here imports
`ddlbench doctor` (harness/doctor/), nor the doctor this (docs/ARCHITECTURE.md, "The GPU module").
"""
