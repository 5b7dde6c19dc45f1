#!/usr/bin/env bash
# The history's detector on real series (issue 45): one sweep recorded BASE times at one commit (no change: any
# change point found there is a false alarm), then SLOWED times with a 10% slowdown injected into one scheme's
# cells (DDLBENCH_FAULT=slow:0:SECONDS:SCHEME, harness/rank/worker.py; SECONDS = 1/9 of that cell's median
# iteration in the first run, so its throughput drops by 10%), each run appended with --history; then
# `ddlbench history changes` and `ddlbench history report`.
#
#   bash scripts/reports/history_real_series.sh reports/history/real          # 10 + 5 runs: on a quiet machine
#   BASE=2 SLOWED=1 bash scripts/reports/history_real_series.sh /tmp/real     # a quick check that it works
#
# Environment: SWEEP (default: a sweep of resnet50-tiny with four schemes, written to OUT/sweep.yaml; e.g.
# SWEEP=sweeps/quick.yaml), SCHEME (the slowed scheme, default wfbp-a2a), BASE (10), SLOWED (5).
# Writes OUT/real.md, OUT/real.json, OUT/changes.md, OUT/changes.json, OUT/history.html; OUT/runs and
# OUT/history hold the runs and their history.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
OUT="${1:?usage: history_real_series.sh OUT}"
BASE="${BASE:-10}"
SLOWED="${SLOWED:-5}"
SCHEME="${SCHEME:-wfbp-a2a}"
PY="${PYTHON:-python}"
mkdir -p "$OUT/runs"
if [ -z "${SWEEP:-}" ]; then
    SWEEP="$OUT/sweep.yaml"
    cat > "$SWEEP" <<YAML
# written by scripts/reports/history_real_series.sh
name: history-real
workloads: [resnet50-tiny]
schemes: [ddp, bsp-a2a, wfbp-a2a, mgwfbp]
workers: [2]
baseline: false
warmup: 3
iters: 10
device: cpu
timeout_s: 300
YAML
fi
ddl() { PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" "$PY" -m harness.cli.main "$@"; }

for i in $(seq 1 "$BASE"); do
    ddl sweep "$SWEEP" --output "$OUT/runs/base-$i" --no-progress --history "$OUT/history" > "$OUT/runs/base-$i.log"
    echo "base run $i of $BASE done"
done
ddl history changes --history "$OUT/history" --all --json "$OUT/unchanged.json" > "$OUT/unchanged.md"

SECONDS_SLOW=$("$PY" - "$OUT/runs/base-1" "$SCHEME" <<'PY'
import sys
import pandas as pd
s = pd.read_parquet(f"{sys.argv[1]}/summary.parquet")
t = s.loc[(s["scheme"] == sys.argv[2]) & (s["status"] == "ok"), "iter_s_median"]
print(f"{float(t.median()) / 9:.4f}")
PY
)
echo "slowing $SCHEME by $SECONDS_SLOW s per iteration (1/9 of its median iteration: -10% throughput)"
for i in $(seq 1 "$SLOWED"); do
    DDLBENCH_FAULT="slow:0:$SECONDS_SLOW:$SCHEME" ddl sweep "$SWEEP" --output "$OUT/runs/slow-$i" --no-progress \
        --history "$OUT/history" > "$OUT/runs/slow-$i.log"
    echo "slowed run $i of $SLOWED done"
done
ddl history changes --history "$OUT/history" --all --json "$OUT/changes.json" > "$OUT/changes.md"
ddl history report --history "$OUT/history" -o "$OUT/history.html"

"$PY" - "$OUT" "$SCHEME" "$BASE" "$SLOWED" "$SECONDS_SLOW" <<'PY'
import json, sys
from pathlib import Path
out, scheme, base, slowed, secs = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
unchanged = [c for c in json.loads((out / "unchanged.json").read_text()) if c["kind"] == "change"]
after = [c for c in json.loads((out / "changes.json").read_text()) if c["kind"] == "change"]
hit = [c for c in after if f" {scheme} " in f" {c['cell']} "]
other = [c for c in after if c not in hit]
import pandas as pd
run_id = lambda name: str(pd.read_parquet(out / "runs" / name / "environment.parquet")["run_id"].iloc[0])
near = {run_id(f"slow-{k}") for k in (1, 2) if (out / "runs" / f"slow-{k}").is_dir()} | {run_id(f"base-{base}")}
result = {"base_runs": base, "slowed_runs": slowed, "scheme": scheme, "sleep_s_per_iteration": float(secs),
          "false_changes_in_unchanged_runs": len(unchanged), "slowed_cell_changes": hit,
          "changes_in_other_cells": other,
          "found_within_one_run": any(c["first_bad_run"].split("@")[0] in near for c in hit)}
(out / "real.json").write_text(json.dumps(result, indent=1) + "\n")
lines = [f"## History on real series: {base} unchanged runs, then {slowed} with {scheme} slowed 10%", "",
         f"- change points in the {base} unchanged runs (false alarms): {len(unchanged)}",
         f"- changes found in the slowed {scheme} cells: {len(hit)} (within one run of the first slowed run: "
         f"{result['found_within_one_run']})"
         + "".join(f"\n  - {c['cell']}: {c['size']:+.1%} ({c['size_low']:+.1%} .. {c['size_high']:+.1%}), first bad run "
                   f"{c['first_bad_run']}, {'confirmed' if c['confirmed'] else 'awaiting runs'}" for c in hit),
         f"- changes in cells not slowed: {len(other)}"
         + "".join(f"\n  - {c['cell']}: {c['size']:+.1%}, first bad run {c['first_bad_run']}" for c in other),
         "", "Every run at one commit, so last good and first bad are the same commit (nothing to bisect).",
         f"Details: changes.md; the page: history.html."]
(out / "real.md").write_text("\n".join(lines) + "\n")
print("\n".join(lines))
PY
