#!/bin/sh
# The showcase: the study's two findings measured on the emulated testbed, rendered into reports/showcase/.
#
#   scripts/reports/showcase.sh                                   # 100 cells + 6 traced, about 40-50 min on 2 cores; root
#   rm -rf results/showcase-* && scripts/reports/showcase.sh      # measure everything again
#
# Run it on a quiet machine (no test suite, no other sweep): each run records the load it saw, and the
# report warns when a run was measured on a busy machine (docs/ARCHITECTURE.md, "Measurement hygiene").
# Every step resumes: after an interruption, run the script again and only the missing cells run.
# Per workload, the Horovod cells (sweeps/showcase-horovod-*.yaml) are measured into the same run
# directory as the others, so they share its 1-worker baselines.
set -eu
cd "$(dirname "$0")/../.."
out=${SHOWCASE_RESULTS:-results}
for part in resnet50 bert; do
    run="$out/showcase-$part"
    ddlbench sweep "sweeps/showcase-$part.yaml" --output "$run" --resume --no-progress --allow-failed-cells
    ddlbench sweep "sweeps/showcase-horovod-$part.yaml" --output "$run" --resume --no-progress --allow-failed-cells
done
ddlbench report "$out/showcase-resnet50" "$out/showcase-bert" -o reports/showcase \
    --title "ddlbench showcase: the study's findings on the emulated testbed (2 and 3 hosts, 200 Mbit/s and 2 Gbit/s)"
# the timelines: a few cells traced in a run of their own (sweeps/showcase-trace.yaml), drawn per cell
ddlbench sweep sweeps/showcase-trace.yaml --output "$out/showcase-trace" --resume --no-progress --allow-failed-cells
ddlbench report "$out/showcase-trace" -o reports/showcase/timelines --timeline all \
    --title "ddlbench showcase timelines: resnet50-tiny, 2 hosts, 200 Mbit/s (slowest rank, traced iterations)"
echo "wrote reports/showcase/report.md, report.html and timelines/"
