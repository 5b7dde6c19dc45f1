#!/usr/bin/env bash
# The project's one test command (the README's second set-up command; .ci/run calls it).
#
#   bash scripts/test.sh [pytest args...]
#
# Installs what the tests need, by the project's own files, then runs the whole suite:
#   1. the pinned CPU torch first (a range met before torch is installed would pull a multi-GB CUDA build),
#   2. this project with its dev extra,
#   3. Horovod (built from source, cached wheel) and DeepSpeed: scripts/install_frameworks.sh.
# Slurm (slurm/local/up.sh) and the emulated network (harness/testbed) are started by the tests that
# need them. Under CI=true, tests whose requirement is missing fail instead of skipping.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
PY="${PYTHON:-python}"

t0=$(date +%s)
"$PY" -m pip install -q torch==2.13.0
"$PY" -m pip install -q -e '.[dev]'
bash scripts/install_frameworks.sh horovod deepspeed
# Debian's Chromium for the history page's browser test (tests/integration/browser/); Playwright drives it, and
# never downloads a browser of its own (`playwright install` is not run). Without it that test says NOT RUN, and
# fails under CI=true.
if ! command -v chromium >/dev/null 2>&1; then
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; } \
        || echo "[test.sh] could not install chromium: the browser test will not run"
fi
echo "[test.sh] set-up took $(( $(date +%s) - t0 )) s"

# The house rules of docs/ARCHITECTURE.md ("Rules"): ruff (lint, and the format every file keeps; pyproject.toml
# [tool.ruff]: lines within 120 characters, complexity by its rules), the project's own checker (loads by name,
# imports at the top, the backend and launcher rules), then the import contracts of pyproject.toml (import-linter).
ruff check harness workloads scripts tests examples
ruff format --check harness workloads scripts tests examples
"$PY" scripts/check_imports.py
lint-imports --no-cache

export DDLBENCH_REQUIRE_FRAMEWORKS="${DDLBENCH_REQUIRE_FRAMEWORKS:-1}"
if [ "$#" -gt 0 ]; then  # a chosen part of the suite, as given: one pytest, one test at a time
    exec "$PY" -m pytest -q -ra --durations=15 "$@"
fi
# The whole suite in two parts (tests/conftest.py marks `serial` what starts processes or needs the machine alone):
# the tests that start no processes two at a time (pytest-xdist, one worker per core), then the multi-process ones
# one at a time. Both parts always run; the command fails if either does.
t1=$(date +%s)
status=0
"$PY" -m pytest -q -ra --durations=15 -n "${DDLBENCH_TEST_WORKERS:-2}" -m "not serial" || status=$?
echo "[test.sh] the tests that start no processes took $(( $(date +%s) - t1 )) s"
t2=$(date +%s)
"$PY" -m pytest -q -ra --durations=40 -m serial || status=$?
echo "[test.sh] the multi-process tests took $(( $(date +%s) - t2 )) s; the tests took $(( $(date +%s) - t1 )) s in all"
exit "$status"
