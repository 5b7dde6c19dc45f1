#!/usr/bin/env bash
# Install the real distributed frameworks ddlbench benchmarks, built for the torch already installed.
#
#   bash scripts/install_frameworks.sh horovod            # Horovod 0.28.1 (source build, cached wheel)
#   bash scripts/install_frameworks.sh deepspeed          # DeepSpeed 0.19.8 (ops JIT-compiled on first use)
#   bash scripts/install_frameworks.sh all                # = horovod deepspeed
#   bash scripts/install_frameworks.sh --check all        # report only; exit 1 if one is missing
#   bash scripts/install_frameworks.sh byteps             # explains why it cannot be installed; exit 3
#   bash scripts/install_frameworks.sh --dry-run horovod  # print the build environment and cache; install nothing
#
# Install torch first (`pip install torch==2.13.0`): this script never installs, upgrades or replaces
# torch. Every pip call runs with a constraint pinning the torch found at start, and the torch version is
# verified again on exit (the script fails loudly if it changed).
#
# Environment:
#   PYTHON                  interpreter to install into (default: python)
#   DDLBENCH_CACHE          cache root (default: ~/.cache/ddlbench); Horovod wheels live in
#                           $DDLBENCH_CACHE/wheels/horovod-<ver>/torch<ver>-py<XY>-<variant>/, build logs
#                           in $DDLBENCH_CACHE/logs/
#   TORCH_EXTENSIONS_DIR    where DeepSpeed's JIT-compiled C++ ops are cached (default:
#                           $DDLBENCH_CACHE/torch_extensions/torch<ver>-py<XY>-<flavour>); export the same
#                           value when running DeepSpeed, or each new folder costs a recompile
#   DDLBENCH_HOROVOD_MPI    1 (default): build Horovod with MPI and gloo; 0: gloo only (no Open MPI needed)
#   MAKEFLAGS               passed to Horovod's build (default: -j<cores>; Horovod itself would use -j8)
#   DDLBENCH_INSTALL_DRY_RUN  1: the same as --dry-run
#   DDLBENCH_FAKE_TORCH_CUDA  dry run only (tests): pretend torch.version.cuda is this (e.g. 12.4)
#
# Horovod on a CUDA torch (torch.version.cuda set) is built with HOROVOD_GPU_OPERATIONS=NCCL against the
# NCCL of torch's wheel and needs nvcc (scripts/horovod_build_env.sh says how and why); its wheels are
# cached apart from CPU ones (<variant> = cu124-nccl-mpi-gloo vs cpu-mpi-gloo), and an installed Horovod
# built without NCCL is replaced. HOROVOD_CUDA_HOME / HOROVOD_NCCL_HOME / HOROVOD_GPU_OPERATIONS, when
# set, are honoured.
# Why Horovod is built from source: 0.28.1 is its newest release and its CMake asks for C++14, while
# scripts/horovod_patches.py: C++17 (torch >= 2.1 headers require it) and the process-set gloo interface
# (Horovod 0.28.1 ignores HOROVOD_GLOO_IFACE there); its PATCH_LEVEL keys the wheel cache.
# Why BytePS is refused: 0.2.5 (newest) does not build against current torch and needs CUDA and NCCL.
set -euo pipefail

HOROVOD_VERSION="0.28.1"
DEEPSPEED_VERSION="0.19.8"
BYTEPS_VERSION="0.2.5"
PY="${PYTHON:-python}"
CACHE="${DDLBENCH_CACHE:-$HOME/.cache/ddlbench}"
HOROVOD_MPI="${DDLBENCH_HOROVOD_MPI:-1}"
SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
DRY_RUN="${DDLBENCH_INSTALL_DRY_RUN:-0}"
# shellcheck source=scripts/horovod_build_env.sh
. "$SCRIPT_DIR/horovod_build_env.sh"

log() { printf '[install_frameworks] %s\n' "$*"; }
die() { printf '[install_frameworks] ERROR: %s\n' "$*" >&2; exit 1; }
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

usage() {
    sed -n '2,9p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
}

# ---------------------------------------------------------------- arguments
CHECK_ONLY=0
TARGETS=()
for arg in "$@"; do
    case "$arg" in
        --check) CHECK_ONLY=1 ;;
        --dry-run) DRY_RUN=1 ;;
        -h|--help) usage; exit 0 ;;
        all) TARGETS+=(horovod deepspeed) ;;
        horovod|deepspeed|byteps) TARGETS+=("$arg") ;;
        *) printf '[install_frameworks] ERROR: unknown argument %q; known: horovod deepspeed byteps all --check --dry-run\n' "$arg" >&2
           usage >&2; exit 2 ;;
    esac
done
if [ ${#TARGETS[@]} -eq 0 ]; then
    printf '[install_frameworks] ERROR: name at least one framework\n' >&2
    usage >&2
    exit 2
fi
# de-duplicate, keeping order ("all horovod" installs horovod once)
declare -A SEEN=()
UNIQUE=()
for t in "${TARGETS[@]}"; do
    if [ -z "${SEEN[$t]:-}" ]; then SEEN[$t]=1; UNIQUE+=("$t"); fi
done
TARGETS=("${UNIQUE[@]}")

# ---------------------------------------------------------------- torch: found, pinned, verified on exit
command -v "$PY" >/dev/null || die "python interpreter '$PY' not found (set PYTHON=...)"
# one interpreter start (importing torch takes seconds): version, python tag, build flavour (cpu, cu121 ...),
# CUDA version (none on a CPU build), the folder of torch's nvidia-nccl package (none without one; last:
# `read` gives the last name the rest of the line, spaces included)
read -r TORCH_VERSION PY_TAG TORCH_LOCAL PY_VERSION TORCH_CUDA NCCL_PKG < <("$PY" -c '
import importlib.util, platform, sys, torch
flavour = torch.__version__.partition("+")[2] or ("cu" + torch.version.cuda.replace(".", "") if torch.version.cuda else "cpu")
try:
    nccl = list(importlib.util.find_spec("nvidia.nccl").submodule_search_locations)[0]
except Exception:  # no nvidia namespace, or no nccl in it
    nccl = "none"
print(torch.__version__, "py%d%d" % sys.version_info[:2], flavour, platform.python_version(), torch.version.cuda or "none", nccl)' 2>/dev/null) || true
[ -n "${TORCH_VERSION:-}" ] || die "torch is not importable with $PY; install it first: pip install torch==2.13.0"
if [ -n "${DDLBENCH_FAKE_TORCH_CUDA:-}" ]; then
    if [ "$DRY_RUN" != 1 ]; then
        printf '[install_frameworks] ERROR: DDLBENCH_FAKE_TORCH_CUDA is honoured only with --dry-run (tests); unset it\n' >&2
        exit 2
    fi
    log "dry run: pretending torch.version.cuda is $DDLBENCH_FAKE_TORCH_CUDA (DDLBENCH_FAKE_TORCH_CUDA; really $TORCH_CUDA)"
    TORCH_CUDA="$DDLBENCH_FAKE_TORCH_CUDA"
fi
TORCH_BASE="${TORCH_VERSION%%+*}"                       # 2.13.0
# JIT-compiled ops are only valid for the torch and python they were built with: key the folder by both
# (tests/integration/processes/test_frameworks_install.py computes the same default)
export TORCH_EXTENSIONS_DIR="${TORCH_EXTENSIONS_DIR:-$CACHE/torch_extensions/torch$TORCH_BASE-$PY_TAG-$TORCH_LOCAL}"

WORK="$(mktemp -d "${TMPDIR:-/tmp}/ddlbench-install.XXXXXX")"
CONSTRAINTS="$WORK/constraints.txt"
echo "torch==$TORCH_VERSION" > "$CONSTRAINTS"

on_exit() {
    local rc=$?
    local after=""
    [ "$DRY_RUN" = 1 ] || after="$("$PY" -c 'import torch; print(torch.__version__)' 2>/dev/null || echo '<not importable>')"
    if [ "$DRY_RUN" = 1 ]; then
        :   # nothing was installed
    elif [ "$after" != "$TORCH_VERSION" ]; then
        printf '[install_frameworks] ERROR: torch CHANGED from %s to %s during this run.\n' "$TORCH_VERSION" "$after" >&2
        printf '[install_frameworks]        restore it: pip install --force-reinstall --no-deps torch==%s\n' "$TORCH_BASE" >&2
        rc=1
    elif [ "$CHECK_ONLY" = 0 ]; then
        log "torch $TORCH_VERSION unchanged (verified)"
    fi
    rm -rf "$WORK"
    exit "$rc"
}
trap on_exit EXIT

pip_install() { "$PY" -m pip install --disable-pip-version-check -c "$CONSTRAINTS" "$@"; }

# Print the missing pip distributions among "import_name:pip_name" pairs.
missing_python_pkgs() {
    "$PY" - "$@" <<'EOF'
import importlib.util, sys
print(" ".join(p.split(":")[1] for p in sys.argv[1:] if importlib.util.find_spec(p.split(":")[0]) is None))
EOF
}

# ---------------------------------------------------------------- Debian packages, only when missing
APT_UPDATED=0
ensure_debs() {
    local missing=() p
    if ! command -v dpkg-query >/dev/null; then
        log "not a Debian system: make sure these (or equivalents) are installed: $*"
        return 0
    fi
    for p in "$@"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
    done
    if [ ${#missing[@]} -eq 0 ]; then
        log "Debian packages present: $*"
        return 0
    fi
    local sudo=""
    if [ "$(id -u)" -ne 0 ]; then
        command -v sudo >/dev/null || die "need root to run: apt-get install ${missing[*]}"
        sudo="sudo"
    fi
    local t0; t0="$(now)"
    log "apt-get install ${missing[*]} ..."
    if [ "$APT_UPDATED" = 0 ]; then
        $sudo apt-get update -qq || die "apt-get update failed"
        APT_UPDATED=1
    fi
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" \
        >"$WORK/apt.log" 2>&1 || { tail -30 "$WORK/apt.log" >&2; die "apt-get install ${missing[*]} failed"; }
    log "apt-get installed ${missing[*]} in $(since "$t0") s"
}

ensure_python_pkgs() {   # args: import_name:pip_name ...
    local missing
    missing="$(missing_python_pkgs "$@")"
    if [ -n "$missing" ]; then
        log "pip install $missing"
        # shellcheck disable=SC2086  # word splitting intended: a list of names
        pip_install $missing >"$WORK/pip-deps.log" 2>&1 \
            || { tail -30 "$WORK/pip-deps.log" >&2; die "pip install $missing failed"; }
    fi
}

declare -A RESULT=()

# ---------------------------------------------------------------- Horovod
# Prints "<version> (built with: mpi gloo ...)" for an importable horovod.torch; on failure, why to stderr.
horovod_info() {
    "$PY" -c '
import os, horovod, horovod.torch as hvd
built = [n for n in ("mpi", "gloo", "nccl", "ccl") if getattr(hvd, n + "_built")()]
marker = os.path.join(os.path.dirname(horovod.__file__), "ddlbench_patch_level")
level = open(marker).read().strip() if os.path.exists(marker) else "0"
print(horovod.__version__, "(patch level %s; built with: %s)" % (level, " ".join(built)))' 2>"$WORK/horovod-import.err"
}
# the installed Horovod carries this installer's source patches ("... (patch level N; ...")
horovod_has_patches() { [[ "$1" == *"(patch level $HVD_PATCH_LEVEL;"* ]]; }
# record the patch level of the wheel just installed (its cache folder is keyed by it)
mark_horovod_patches() {
    "$PY" -c 'import os, sys, horovod; open(os.path.join(os.path.dirname(horovod.__file__), "ddlbench_patch_level"), "w").write(sys.argv[1])' "$HVD_PATCH_LEVEL"
}

hvd_ver() { local v="${1%% *}"; echo "${v%%+*}"; }   # "0.28.1 (built with ..)" -> 0.28.1
# "0.28.1 (built with: mpi gloo nccl)" has what this torch needs (nccl on a CUDA torch; nothing on CPU)
horovod_has_needs() { [ -z "$HVD_NEEDS" ] || [[ " ${1#*: }" == *" $HVD_NEEDS"* ]]; }

# GPU flavour first: cpu, or cu124-nccl on a CUDA torch (scripts/horovod_build_env.sh), so a CPU wheel is
# never taken for a CUDA box or the other way round
horovod_gpu_plan
HVD_VARIANT="$HVD_FLAVOUR-$([ "$HOROVOD_MPI" = 1 ] && echo mpi-gloo || echo gloo)"
# which of our source patches the wheel carries (scripts/horovod_patches.py); a wheel with fewer is rebuilt
HVD_PATCH_LEVEL="$("$PY" -c 'import runpy, sys; print(runpy.run_path(sys.argv[1])["PATCH_LEVEL"])' "$SCRIPT_DIR/horovod_patches.py")"
HVD_VARIANT="$HVD_VARIANT-p$HVD_PATCH_LEVEL"
if [ "$TORCH_CUDA" = none ] && [ -n "${HOROVOD_GPU_OPERATIONS:-}" ]; then
    HVD_VARIANT="$HVD_VARIANT-$(echo "$HOROVOD_GPU_OPERATIONS" | tr 'A-Z' 'a-z')"
fi
# the collective library this torch needs in the built Horovod (hvd.nccl_built()), or nothing on CPU
HVD_NEEDS=""
if [ "$TORCH_CUDA" != none ] && [ "${HOROVOD_GPU_OPERATIONS:-NCCL}" = NCCL ]; then HVD_NEEDS=nccl; fi
HVD_WHEEL_DIR="$CACHE/wheels/horovod-$HOROVOD_VERSION/torch$TORCH_BASE-$PY_TAG-$HVD_VARIANT"

horovod_debs() {
    if [ "$HOROVOD_MPI" = 1 ]; then echo "openmpi-bin libopenmpi-dev"; fi
}

build_horovod_wheel() {
    local t0 sdist_dir sdist src logf out wheel
    t0="$(now)"
    # shellcheck disable=SC2046
    ensure_debs cmake g++ make $(horovod_debs)
    ensure_python_pkgs numpy:numpy cloudpickle:cloudpickle psutil:psutil yaml:pyyaml cffi:cffi \
        packaging:packaging wheel:wheel setuptools:setuptools

    sdist_dir="$CACHE/sdists"
    sdist="$sdist_dir/horovod-$HOROVOD_VERSION.tar.gz"
    mkdir -p "$sdist_dir"
    if [ ! -f "$sdist" ]; then
        log "downloading the Horovod $HOROVOD_VERSION sdist"
        "$PY" -m pip download --disable-pip-version-check --no-deps --no-binary :all: --no-build-isolation \
            -d "$sdist_dir" "horovod==$HOROVOD_VERSION" >"$WORK/download.log" 2>&1 \
            || { tail -20 "$WORK/download.log" >&2; die "could not download the Horovod $HOROVOD_VERSION sdist"; }
    fi
    tar -xzf "$sdist" -C "$WORK"
    src="$WORK/horovod-$HOROVOD_VERSION"
    log "patching Horovod (C++17 for torch's headers; process-set gloo interface), patch level $HVD_PATCH_LEVEL"
    "$PY" "$SCRIPT_DIR/horovod_patches.py" "$src"

    mkdir -p "$CACHE/logs"
    logf="$CACHE/logs/horovod-$HOROVOD_VERSION-torch$TORCH_BASE-$PY_TAG-$HVD_VARIANT-$(date +%Y%m%d-%H%M%S).log"
    out="$WORK/wheel-out"
    horovod_build_env
    log "building the Horovod $HOROVOD_VERSION wheel ($HVD_VARIANT: ${HVD_BUILD_ENV[*]});"
    local note
    for note in "${HVD_GPU_NOTES[@]}"; do log "  $note"; done
    # measured: ~9 min of CPU; 7 min wall on a quiet 2-core box, 36 min when other jobs share the cores
    log "  takes 5-10 minutes on an idle 2-core machine (much longer on a busy one); log: $logf"
    env "${HVD_BUILD_ENV[@]}" \
        "$PY" -m pip wheel --disable-pip-version-check -v --no-build-isolation --no-deps \
            -c "$CONSTRAINTS" -w "$out" "$src" >"$logf" 2>&1 \
        || { tail -40 "$logf" >&2
             die "Horovod build failed (full log: $logf); a gloo-only build may avoid MPI trouble: DDLBENCH_HOROVOD_MPI=0"; }
    wheel="$(ls "$out"/horovod-"$HOROVOD_VERSION"-*.whl 2>/dev/null | head -n1)"
    [ -n "$wheel" ] || die "pip wheel succeeded but left no horovod wheel in $out (log: $logf)"
    # into the cache atomically: a half-copied wheel must never look like a cached one
    mkdir -p "$HVD_WHEEL_DIR"
    cp "$wheel" "$HVD_WHEEL_DIR/.partial.$$"
    mv "$HVD_WHEEL_DIR/.partial.$$" "$HVD_WHEEL_DIR/$(basename "$wheel")"
    BUILD_SECONDS="$(since "$t0")"
    log "built $(basename "$wheel") in $BUILD_SECONDS s -> $HVD_WHEEL_DIR/"
}

install_horovod_wheel() {   # arg: wheel path
    # shellcheck disable=SC2046
    [ -z "$(horovod_debs)" ] || ensure_debs $(horovod_debs)   # the MPI build links libmpi at import
    ensure_python_pkgs numpy:numpy cloudpickle:cloudpickle psutil:psutil yaml:pyyaml cffi:cffi packaging:packaging
    pip_install --no-deps --force-reinstall "$1" >"$WORK/pip-install.log" 2>&1 \
        || { cat "$WORK/pip-install.log" >&2; die "pip install $1 failed"; }
    mark_horovod_patches
    sed -n 's/^Successfully installed /  pip installed: /p' "$WORK/pip-install.log"
}

do_horovod() {
    local t0 have wheel
    t0="$(now)"
    if have="$(horovod_info)" && [ "$(hvd_ver "$have")" = "$HOROVOD_VERSION" ] && horovod_has_needs "$have" \
        && horovod_has_patches "$have"; then
        log "horovod $have already present (horovod.torch imports; checked in $(since "$t0") s): nothing to do"
        RESULT[horovod]="already present: horovod $have"
        return 0
    fi
    if [ -n "${have:-}" ] && ! horovod_has_patches "$have"; then
        log "horovod $have lacks this installer's patches (level $HVD_PATCH_LEVEL, scripts/horovod_patches.py): replacing it"
    elif [ -n "${have:-}" ] && ! horovod_has_needs "$have"; then
        log "horovod $have is installed but torch has CUDA $TORCH_CUDA and it was built without $HVD_NEEDS: replacing it"
    elif [ -n "${have:-}" ]; then
        log "horovod $have is installed, $HOROVOD_VERSION wanted: replacing it"
    elif [ -s "$WORK/horovod-import.err" ] && ! grep -q "No module named 'horovod'" "$WORK/horovod-import.err"; then
        log "horovod is installed but horovod.torch does not import (built for another torch?):"
        tail -3 "$WORK/horovod-import.err" | sed 's/^/    /'
    fi
    wheel="$(ls "$HVD_WHEEL_DIR"/horovod-"$HOROVOD_VERSION"-*.whl 2>/dev/null | head -n1 || true)"
    if [ -n "$wheel" ]; then
        log "cached wheel found: $wheel"
        install_horovod_wheel "$wheel"
        have="$(horovod_info)" || { cat "$WORK/horovod-import.err" >&2
            die "the cached wheel installed but horovod.torch does not import; delete $HVD_WHEEL_DIR and rerun to rebuild"; }
        RESULT[horovod]="installed from cache in $(since "$t0") s: horovod $have"
    else
        log "no cached wheel in $HVD_WHEEL_DIR: building from source"
        [ -z "$HVD_GPU_PROBLEM" ] || die "$HVD_GPU_PROBLEM"
        build_horovod_wheel
        local t1; t1="$(now)"
        wheel="$(ls "$HVD_WHEEL_DIR"/horovod-"$HOROVOD_VERSION"-*.whl | head -n1)"
        install_horovod_wheel "$wheel"
        have="$(horovod_info)" || { cat "$WORK/horovod-import.err" >&2
            die "Horovod built and installed but horovod.torch does not import"; }
        RESULT[horovod]="built in $BUILD_SECONDS s, installed in $(since "$t1") s (total $(since "$t0") s): horovod $have"
    fi
    log "${RESULT[horovod]}"
}

# ---------------------------------------------------------------- DeepSpeed
deepspeed_version() {
    "$PY" -c 'import deepspeed; print("DS_VERSION=" + deepspeed.__version__)' 2>"$WORK/ds-import.err" \
        | sed -n 's/^DS_VERSION=//p' | grep .
}

do_deepspeed() {
    local t0 have
    t0="$(now)"
    mkdir -p "$TORCH_EXTENSIONS_DIR"
    if have="$(deepspeed_version)" && [ "${have%%+*}" = "$DEEPSPEED_VERSION" ]; then
        log "deepspeed $have already present (checked in $(since "$t0") s): nothing to do"
        RESULT[deepspeed]="already present: deepspeed $have"
    else
        [ -n "${have:-}" ] && log "deepspeed $have is installed, $DEEPSPEED_VERSION wanted: replacing it"
        ensure_python_pkgs setuptools:setuptools wheel:wheel packaging:packaging
        log "pip install deepspeed==$DEEPSPEED_VERSION (DS_BUILD_OPS=0: C++ ops are JIT-compiled on first use)"
        # --no-build-isolation: DeepSpeed's setup.py imports torch; in an isolated build env pip would fetch one
        DS_BUILD_OPS=0 pip_install --no-build-isolation "deepspeed==$DEEPSPEED_VERSION" >"$WORK/ds-install.log" 2>&1 \
            || { tail -30 "$WORK/ds-install.log" >&2; die "pip install deepspeed==$DEEPSPEED_VERSION failed"; }
        sed -n 's/^Successfully installed /  pip installed: /p' "$WORK/ds-install.log"
        have="$(deepspeed_version)" || { cat "$WORK/ds-import.err" >&2; die "deepspeed installed but does not import"; }
        RESULT[deepspeed]="installed in $(since "$t0") s: deepspeed $have"
    fi
    log "${RESULT[deepspeed]}"
    # deepspeed.init_distributed() on CPU JIT-compiles its shared-memory comm op (40 s idle, minutes on a
    # busy 2-core box); build it now, through DeepSpeed's own code path, so the first run does not pay.
    local t1; t1="$(now)"
    log "DeepSpeed CPU comm op: compiling or loading in TORCH_EXTENSIONS_DIR=$TORCH_EXTENSIONS_DIR"
    "$PY" -c '
from deepspeed.comm.torch import build_shm_op
print("DS_SHM=" + ("ready" if build_shm_op() is not None else "not used by this accelerator"))' \
        >"$WORK/ds-shm.log" 2>&1 || { tail -30 "$WORK/ds-shm.log" >&2
            die "DeepSpeed could not compile its CPU comm op (needs g++ and ninja); see the log above"; }
    local shm; shm="CPU comm op $(sed -n 's/^DS_SHM=//p' "$WORK/ds-shm.log") after $(since "$t1") s"
    log "DeepSpeed $shm"
    RESULT[deepspeed]="${RESULT[deepspeed]}; $shm"
    log "when running DeepSpeed: export TORCH_EXTENSIONS_DIR=$TORCH_EXTENSIONS_DIR"
}

# ---------------------------------------------------------------- BytePS: explained, never pretended
explain_byteps() {
    cat >&2 <<EOF
[install_frameworks] byteps: NOT INSTALLED, and this script cannot install it.
    BytePS $BYTEPS_VERSION (its newest release) does not build against current torch ($TORCH_VERSION here),
    and its build requires CUDA and NCCL, which a CPU-only machine does not have.
    The byteps backend of ddlbench cannot run on this machine. For parameter-server results use the
    bsp-ps / wfbp-ps / bytescheduler-ps methods, which run on the torch backend.
EOF
}

# ---------------------------------------------------------------- --check
check_one() {   # prints a status line; returns 1 when missing or wrong version
    local have
    case "$1" in
        horovod)
            if have="$(horovod_info)"; then
                log "horovod: $have (horovod.torch imports)$([ "$(hvd_ver "$have")" = "$HOROVOD_VERSION" ] || echo "; $HOROVOD_VERSION expected")$(horovod_has_needs "$have" || echo "; built without $HVD_NEEDS but torch has CUDA $TORCH_CUDA")$(horovod_has_patches "$have" || echo "; patch level $HVD_PATCH_LEVEL expected")"
                [ "$(hvd_ver "$have")" = "$HOROVOD_VERSION" ] && horovod_has_needs "$have" && horovod_has_patches "$have"
            else
                log "horovod: MISSING (install: bash scripts/install_frameworks.sh horovod)"
                return 1
            fi ;;
        deepspeed)
            if have="$(deepspeed_version)"; then
                log "deepspeed: $have$([ "${have%%+*}" = "$DEEPSPEED_VERSION" ] || echo "; $DEEPSPEED_VERSION expected")"
                log "  TORCH_EXTENSIONS_DIR=$TORCH_EXTENSIONS_DIR"
                [ "${have%%+*}" = "$DEEPSPEED_VERSION" ]
            else
                log "deepspeed: MISSING (install: bash scripts/install_frameworks.sh deepspeed)"
                return 1
            fi ;;
        byteps)
            if have="$("$PY" -c 'import byteps.torch, byteps; print(getattr(byteps, "__version__", "?"))' 2>/dev/null)"; then
                log "byteps: $have (importable)"
            else
                log "byteps: MISSING (not installable here: needs CUDA+NCCL and an older torch)"
                return 1
            fi ;;
    esac
}

log "python $PY_VERSION ($(command -v "$PY")), torch $TORCH_VERSION, cache $CACHE"
if [ "$DRY_RUN" = 1 ]; then
    for t in "${TARGETS[@]}"; do
        case "$t" in
            horovod) dry_run_horovod ;;
            deepspeed) log "dry run: pip install deepspeed==$DEEPSPEED_VERSION with DS_BUILD_OPS=0 TORCH_EXTENSIONS_DIR=$TORCH_EXTENSIONS_DIR" ;;
            byteps) log "dry run: byteps cannot be installed (needs CUDA+NCCL and an older torch)" ;;
        esac
    done
    exit 0
fi
if [ "$CHECK_ONLY" = 1 ]; then
    rc=0
    for t in "${TARGETS[@]}"; do check_one "$t" || rc=1; done
    exit "$rc"
fi

rc=0
for t in "${TARGETS[@]}"; do
    case "$t" in
        horovod) do_horovod ;;
        deepspeed) do_deepspeed ;;
        byteps) explain_byteps; RESULT[byteps]="NOT SUPPORTED (needs CUDA+NCCL and an older torch)"; rc=3 ;;
    esac
done

log "summary:"
for t in "${TARGETS[@]}"; do log "  $t: ${RESULT[$t]}"; done
exit "$rc"
