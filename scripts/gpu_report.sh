#!/usr/bin/env bash
# The GPU module on one GPU, within one lease of the GPU machine (README, "GPUs"): two parts, each under
# 5 minutes on an H100/H200, about 6 in all on an H200 (reports/gpu/2026-11-26-h200-after: 67 s + about 280 s).
#
#   bash scripts/gpu_report.sh OUT               # both parts
#   bash scripts/gpu_report.sh OUT correctness   # part 1: doctor, then the correctness checks in parallel
#   bash scripts/gpu_report.sh OUT timing        # part 2: the timing checks, serially, alone on the GPU
#
# Part 1: `ddlbench doctor --device cuda --quick`, then `pytest -m "gpu and not timing"` in parallel processes
#         (pytest-xdist, -n 8 where it is installed): every scheme at world size 1 over NCCL, ranks sharing
#         the GPU over gloo (lossless against a reference on the GPU, and the negative control), TF32.
# Part 2: `pytest -m "gpu and timing"`, one at a time: the event phases against the device iteration and a
#         synchronised wall clock, and harness/doctor/gpu_timing.py (harness against bare loops for every study
#         workload and dtype, the variants explaining a difference, kernels, profiles, the study's table).
# Commit OUT as reports/gpu/<date>-<gpu>/. Runs from a checkout without installing (PYTHONPATH=the checkout),
# as on a machine with torch (CUDA), transformers, pandas, pyarrow, click, rich, scipy and matplotlib.
# Horovod, DeepSpeed and BytePS checks say NOT RUN with their reason where those are not installed.
# Exit status: the first failing part's.
set -uo pipefail
out="${1:?usage: bash scripts/gpu_report.sh OUT [correctness|timing]}"
part="${2:-all}"
case "$part" in all|correctness|timing) ;; *) echo "unknown part $part: use correctness, timing or nothing (both)" >&2; exit 2 ;; esac
cd "$(dirname "${BASH_SOURCE[0]}")/.."
mkdir -p "$out"
out="$(cd "$out" && pwd)"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 DDLBENCH_GPU_REPORT="$out"
PY="${PYTHON:-python}"
status=0
now() { date +%s; }

{ nvidia-smi || true; nvidia-smi topo -m || true; } > "$out/nvidia-smi.txt" 2>&1
"$PY" - > "$out/versions.json" <<'EOF'
import json, platform, torch
print(json.dumps({"python": platform.python_version(), "torch": torch.__version__, "cuda": torch.version.cuda,
                  "cudnn": torch.backends.cudnn.version(), "nccl": ".".join(map(str, torch.cuda.nccl.version())),
                  "gpus": [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]}, indent=1))
EOF

if [ "$part" != timing ]; then
    t0=$(now)
    "$PY" -m harness.cli.main doctor --device cuda --quick > "$out/doctor.txt" 2>&1
    echo "[gpu_report] doctor exit status $?" | tee -a "$out/doctor.txt"
    par=()
    "$PY" -c "import xdist" 2>/dev/null && par=(-n 8)
    "$PY" -m pytest -m "gpu and not timing" tests -q -ra -p no:cacheprovider "${par[@]}" \
        --junitxml "$out/gpu-correctness.xml" 2>&1 | tee "$out/gpu-correctness.txt"
    s=${PIPESTATUS[0]}
    [ "$status" -eq 0 ] && status=$s
    echo "[gpu_report] part 1 (doctor + correctness): exit status $s in $(( $(now) - t0 )) s" | tee -a "$out/parts.txt"
fi
if [ "$part" != correctness ]; then
    t0=$(now)
    "$PY" -m pytest -m "gpu and timing" tests -q -ra -p no:cacheprovider -p no:xdist \
        --junitxml "$out/gpu-timing.xml" 2>&1 | tee "$out/gpu-timing.txt"
    s=${PIPESTATUS[0]}
    [ "$status" -eq 0 ] && status=$s
    echo "[gpu_report] part 2 (timing): exit status $s in $(( $(now) - t0 )) s" | tee -a "$out/parts.txt"
fi
echo "[gpu_report] exit status $status; results in $out"
exit "$status"
