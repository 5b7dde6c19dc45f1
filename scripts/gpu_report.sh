#!/usr/bin/env bash
# The GPU module in one command that always finishes with its verdict (README, "GPUs"): both parts within a
# time budget (default 420 s), correctness included; harness/doctor/timing/gpu_report.py does the work.
#
#   bash scripts/gpu_report.sh OUT                   # on the GPU machine, within 420 s
#   bash scripts/gpu_report.sh OUT --budget 300      # within 300 s: what no longer fits says NOT RUN
#   bash scripts/gpu_report.sh OUT --device cpu      # the same script on a CPU: tiny workloads, GPU-only checks NOT RUN
#
# OUT (new or empty) ends with exactly three files: summary.md (every check, its verdict, its figure, its
# reason), summary.json (the same, for machines), details.tar.gz (logs, CSVs, the sweep, the profiles). The
# summary is written first and completed as each check ends: a run killed from outside leaves every verdict
# it reached. Commit OUT as reports/gpu/<date>-<gpu>/ with a README. Runs from a checkout without installing
# (PYTHONPATH=the checkout), on a machine with torch (CUDA), transformers, pandas, pyarrow, click, rich, scipy,
# matplotlib and pytest. Exit status: 1 when a check FAILED, 2 on bad input, else 0.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
exec "${PYTHON:-python}" -m harness.doctor.timing.gpu_report "$@"
