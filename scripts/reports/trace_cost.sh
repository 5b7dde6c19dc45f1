#!/bin/sh
# What tracing costs: sweeps/trace-cost.yaml run untraced and with every measured iteration traced, in
# alternation (off, on, off, on, ...), then the traced runs compared with the untraced ones by the gate
# over rounds (README, "Timelines"): per cell the ratio traced / untraced and the smallest change the
# runs could resolve. Writes reports/trace-cost/compare.md.
#
#   scripts/reports/trace_cost.sh            # 3 rounds, about 10 min on 2 cores; nothing else running
#   TRACE_COST_ROUNDS=5 scripts/reports/trace_cost.sh
set -eu
cd "$(dirname "$0")/../.."
rounds=${TRACE_COST_ROUNDS:-3}
out=${TRACE_COST_RESULTS:-results/trace-cost}
iters=$(python -c "from harness.experiment.sweep import load_sweep; print(load_sweep('sweeps/trace-cost.yaml').iters)")
mkdir -p "$out" reports/trace-cost
off="" on=""
for k in $(seq 1 "$rounds"); do
    ddlbench sweep sweeps/trace-cost.yaml --output "$out/off-$k" --resume --no-progress
    ddlbench sweep sweeps/trace-cost.yaml --output "$out/on-$k" --resume --no-progress --trace "$iters"
    off="$off $out/off-$k" on="$on $out/on-$k"
done
# shellcheck disable=SC2086  # the run lists are meant to split
ddlbench baseline save untraced $off --dir "$out/baselines" --force
code=0
# shellcheck disable=SC2086
ddlbench compare untraced $on --baselines-dir "$out/baselines" > reports/trace-cost/compare.md || code=$?
cat reports/trace-cost/compare.md
# exit 1 from compare means tracing slowed a cell beyond the factor: that is the finding, not a failure
[ "$code" -le 1 ] || exit "$code"
echo "wrote reports/trace-cost/compare.md"
