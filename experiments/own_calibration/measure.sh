#!/usr/bin/env bash
# The inputs of reports/own-calibration/ (issue 60), measured one after another on a quiet machine: the testbed
# with ONE worker per host and every host a processor share of its own (sweeps/testbed-share-*host.yaml: 0.4 of a
# core), at 2, 3 and 4 hosts (the 2-host run's 1-worker cells are the one-host measurement); the profiles alone and
# beside 1..3 copies (the compute variants the report sets beside the default); commbench at each hosts x rate with
# the same shares (for the uncalibrated predictor the report compares with).
# The sweeps run in ROUNDS interleaved rounds (S2 S3 S4, S2-r2 S3-r2 S4-r2, ...), each round after a speed probe
# (`ddlbench profile` of each workload alone, probe-rK-*.parquet), so that the machine's drift over minutes
# lands on every host count alike and shows in the probes rather than in one run.
#   ROUNDS=2 bash experiments/own_calibration/measure.sh OUT     # from the repository's root, as root
set -euo pipefail
out=${1:?usage: experiments/own_calibration/measure.sh OUT}
share=0.4
mkdir -p "$out"
stamp() { echo "$(date -u +%H:%M:%S) load $(cut -d' ' -f1 /proc/loadavg) $*" | tee -a "$out/log.txt"; }
stamp start
rounds=${ROUNDS:-2}
for k in $(seq 1 "$rounds"); do
  suffix=$([ "$k" = 1 ] && echo "" || echo "-r$k")
  for w in bert-base-tiny resnet50-tiny; do
    ddlbench profile $w --batch 8 -o "$out/probe-r$k-$w.parquet" > /dev/null
  done
  stamp "probe r$k"
  for h in 2 3 4; do
    ddlbench sweep "sweeps/testbed-share-${h}host.yaml" --output "$out/S$h$suffix" --no-progress \
        > "$out/S$h$suffix.log" 2>&1
    stamp "S$h$suffix"
  done
done
for w in bert-base-tiny resnet50-tiny; do
  ddlbench profile $w --batch 8 -o "$out/profile-$w-c1.parquet" > /dev/null
  for c in 2 3 4; do ddlbench profile $w --batch 8 --concurrent $c -o "$out/profile-$w-c$c.parquet" > /dev/null; done
done
stamp profiles
for h in 2 3 4; do
  for r in 200mbit 1gbit; do
    ddlbench testbed up --hosts $h --rate $r --host-cpus $share > /dev/null
    ddlbench commbench --testbed --workers $h --min-size 4K --max-size 32M --output "$out/CB-${h}h-$r" > /dev/null
    ddlbench commbench --testbed --workers $h --collective pushpull --servers 1 --min-size 4K --max-size 32M \
        --output "$out/CB-${h}h-$r" > /dev/null
  done
done
ddlbench testbed down > /dev/null
stamp commbench
