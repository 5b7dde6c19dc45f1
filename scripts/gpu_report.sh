#!/usr/bin/env bash
# The first run on a GPU node, kept (README, "First run on GPUs"): doctor, the GPU test module, the
# harness's one-GPU throughput of every real workload against a bare loop (fp32 and bf16), the GPU profile of
# the study's workloads and the study's table predicted from it, and the environment. Commit OUT as
# reports/gpu/.
#
#   bash scripts/gpu_report.sh OUT                 # everything (about 20 minutes on one H100)
#   bash scripts/gpu_report.sh OUT -k "one_worker"  # a part: extra arguments go to pytest
#
# Runs from a checkout without installing (PYTHONPATH=the checkout), as on a machine with torch, CUDA,
# transformers, pandas, pyarrow, click, rich, scipy and matplotlib. Horovod, DeepSpeed and BytePS checks
# say NOT RUN with their reason where those are not installed. Exit status: pytest's.
set -uo pipefail
out="${1:?usage: bash scripts/gpu_report.sh OUT [pytest args...]}"
shift
cd "$(dirname "${BASH_SOURCE[0]}")/.."
mkdir -p "$out"
out="$(cd "$out" && pwd)"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 DDLBENCH_GPU_REPORT="$out"
PY="${PYTHON:-python}"

{ nvidia-smi || true; nvidia-smi topo -m || true; } > "$out/nvidia-smi.txt" 2>&1
"$PY" - > "$out/versions.json" <<'EOF'
import json, platform, torch
print(json.dumps({"python": platform.python_version(), "torch": torch.__version__, "cuda": torch.version.cuda,
                  "cudnn": torch.backends.cudnn.version(), "nccl": ".".join(map(str, torch.cuda.nccl.version())),
                  "gpus": [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]}, indent=1))
EOF
"$PY" -m harness.cli doctor --device cuda --quick > "$out/doctor.txt" 2>&1
echo "[gpu_report] doctor exit status $?" | tee -a "$out/doctor.txt"
"$PY" -m pytest -m gpu tests -q -ra -p no:cacheprovider --junitxml "$out/gpu-tests.xml" "$@" 2>&1 | tee "$out/gpu-tests.txt"
status=${PIPESTATUS[0]}
echo "[gpu_report] pytest exit status $status; results in $out"
exit "$status"
