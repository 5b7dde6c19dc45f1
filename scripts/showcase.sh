#!/bin/sh
# The showcase: the study's two findings measured on the emulated testbed, rendered into reports/showcase/.
#
#   scripts/showcase.sh                 # about 35 min on 2 cores (88 cells); needs root for the testbed
#   rm -rf results/showcase-*host && scripts/showcase.sh     # measure everything again
#
# Run it on a quiet machine (no test suite, no other sweep): each run records the load it saw, and the
# report warns when a run was measured on a busy machine (docs/ARCHITECTURE.md, "Measurement hygiene").
# Every step resumes: after an interruption, run the script again and only the missing cells run.
# For each host count, the Horovod cells are measured into the same run directory as the others
# (sweeps/showcase-horovod-*host.yaml), so they share its 1-worker baselines.
set -eu
cd "$(dirname "$0")/.."
out=${SHOWCASE_RESULTS:-results}
for hosts in 2 3; do
    run="$out/showcase-${hosts}host"
    ddlbench sweep "sweeps/showcase-${hosts}host.yaml" --output "$run" --resume --no-progress --allow-failed-cells
    ddlbench sweep "sweeps/showcase-horovod-${hosts}host.yaml" --output "$run" --resume --no-progress \
        --allow-failed-cells
done
ddlbench report "$out/showcase-2host" "$out/showcase-3host" -o reports/showcase \
    --title "ddlbench showcase: the study's findings on the emulated testbed (2 and 3 hosts, 200 Mbit/s and 2 Gbit/s)"
echo "wrote reports/showcase/report.md and report.html"
