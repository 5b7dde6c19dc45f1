#!/usr/bin/env bash
# The inputs of reports/own-calibration/ (issue 51), measured one after another on a quiet machine:
# the one-host run (2 workers on loopback), the 2- and 3-host testbed sweeps, the profiles alone and beside
# 1 and 2 copies, and commbench at each hosts x rate (for the uncalibrated predictor the report compares with).
#   bash experiments/own_calibration/measure.sh OUT     # from the repository's root
set -euo pipefail
out=${1:?usage: experiments/own_calibration/measure.sh OUT}
mkdir -p "$out"
stamp() { echo "$(date -u +%H:%M:%S) load $(cut -d' ' -f1 /proc/loadavg) $*" | tee -a "$out/log.txt"; }
stamp start
ddlbench sweep sweeps/testbed-study-1host.yaml --output "$out/S1" --no-progress > "$out/S1.log" 2>&1; stamp S1
ddlbench sweep sweeps/testbed-study-2host.yaml --output "$out/S2" --no-progress > "$out/S2.log" 2>&1; stamp S2
ddlbench sweep sweeps/testbed-study-3host.yaml --output "$out/S3" --no-progress > "$out/S3.log" 2>&1; stamp S3
for w in bert-base-tiny resnet50-tiny; do
  ddlbench profile $w --batch 8 -o "$out/profile-$w-c1.parquet" > /dev/null
  for c in 2 3; do ddlbench profile $w --batch 8 --concurrent $c -o "$out/profile-$w-c$c.parquet" > /dev/null; done
done
stamp profiles
for h in 2 3; do
  for r in 200mbit 1gbit; do
    ddlbench testbed up --hosts $h --rate $r > /dev/null
    ddlbench commbench --testbed --workers $h --min-size 4K --max-size 32M --output "$out/CB-${h}h-$r" > /dev/null
    ddlbench commbench --testbed --workers $h --collective pushpull --servers 1 --min-size 4K --max-size 32M \
        --output "$out/CB-${h}h-$r" > /dev/null
  done
done
ddlbench testbed down > /dev/null
stamp commbench
