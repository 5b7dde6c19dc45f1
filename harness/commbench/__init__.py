"""The one collective timer (docs/ARCHITECTURE.md, "Timing a collective"): all-reduce, push-pull and
point-to-point ping-pong over message sizes, the way `ddlbench commbench`, the testbed's link check
(`ddlbench testbed measure`) and the predictor's probes all time them.

    ddlbench commbench --workers 2 --collective allreduce --min-size 4K --max-size 256M

Per size: warm-up, then `reps` timed repetitions, each preceded by a barrier and timed on every rank;
a repetition's time is the slowest rank's. algbw = size/time; busbw = algbw * 2(n-1)/n for all-reduce
(nccl-tests' convention), = algbw otherwise. A least-squares fit t = alpha + beta*size over the
per-size medians is stored with the rows; `mgwfbp` can read it (knob commbench_run).

Rooms:
  run       `ddlbench commbench` as a run (CommbenchSpec, run_commbench); a commbench cell: build it, launch
            its ranks, read its result
  rows      result -> tidy commbench rows with the alpha-beta fit
  store     the rows merged into RUN/commbench.parquet, the run's environment row
  testbed   the testbed's link check (`ddlbench testbed measure`)
Below it: message sizes (harness/measure/sizes.py), the rank loop (harness/measure/collective.py), the rank
entry point (harness/rank/commbench.py), the fit a stored run recorded (harness/results/alpha_beta.py).
"""
