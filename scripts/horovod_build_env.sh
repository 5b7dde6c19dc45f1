# shellcheck shell=bash
# Sourced by scripts/install_frameworks.sh: the environment Horovod's build is given, CPU or CUDA.
#
# CPU torch (torch.version.cuda is None): exactly the environment the installer always used; nothing
# GPU-related is set (a HOROVOD_GPU_OPERATIONS already in the caller's environment still reaches the
# build and the cache key, as before).
# CUDA torch: Horovod's GPU collectives on NCCL. Horovod 0.28.1 reads, at build time (its CMakeLists.txt
# and cmake/Modules/FindNCCL.cmake; docs/gpus.rst):
#   HOROVOD_GPU_OPERATIONS=NCCL   every GPU collective (allreduce, allgather, broadcast, alltoall,
#                                 reducescatter) on NCCL; without it CUDA tensors go through host copies
#   HOROVOD_CUDA_HOME             CUDA toolkit root: CMake takes $HOROVOD_CUDA_HOME/bin/nvcc as the CUDA
#                                 compiler (Horovod compiles a few CUDA kernels, so nvcc is required)
#   HOROVOD_NCCL_HOME / _INCLUDE / _LIB   where nccl.h and the library are
#   HOROVOD_NCCL_LINK=SHARED      link libnccl.so (the default looks for libnccl_static.a first)
# NCCL is taken from the torch wheel's own nvidia-nccl package when there is one, so Horovod and torch
# use the same libnccl.so.2 (same soname: the copy torch loaded first serves both). That package ships
# only the versioned libnccl.so.2 while FindNCCL asks for "nccl" (libnccl.so): a one-link folder in the
# installer's scratch space gives the linker that name.
#
# Inputs (set by the installer): TORCH_CUDA ("none" or e.g. 12.4), NCCL_PKG (torch's nvidia/nccl folder
# or "none"), TORCH_LOCAL, HOROVOD_MPI, WORK.
# horovod_gpu_plan sets HVD_FLAVOUR (cache-key part: cpu | cu124-nccl ...), HVD_GPU_PROBLEM (empty, or one
# line saying what is missing and how to get it), HVD_GPU_ENV (array of VAR=value), HVD_GPU_NOTES;
# horovod_build_env sets HVD_BUILD_ENV, the whole build environment; dry_run_horovod prints it.

HVD_FLAVOUR=""
HVD_GPU_PROBLEM=""
HVD_GPU_ENV=()
HVD_GPU_NOTES=()

# The CUDA toolkit root whose nvcc Horovod's CMake will use, or nothing.
horovod_find_nvcc() {
    local nvcc=""
    if [ -n "${HOROVOD_CUDA_HOME:-}" ]; then
        [ -x "$HOROVOD_CUDA_HOME/bin/nvcc" ] && nvcc="$HOROVOD_CUDA_HOME/bin/nvcc"
    elif command -v nvcc >/dev/null; then
        nvcc="$(command -v nvcc)"
    elif [ -x /usr/local/cuda/bin/nvcc ]; then
        nvcc=/usr/local/cuda/bin/nvcc
    fi
    [ -n "$nvcc" ] || return 1
    # nvcc on PATH may be a symlink or a wrapper script (`exec /usr/local/cuda-13.0/bin/nvcc "$@"`): ask
    # the real driver where it lives (its --dryrun prints `#$ _HERE_=<toolkit>/bin`)
    local here
    here="$("$nvcc" --dryrun -x cu -c /dev/null -o /dev/null 2>&1 | sed -n 's/^#\$ _HERE_=//p' | head -n1)"
    if [ -n "$here" ] && [ -d "$here" ]; then
        (cd "$here/.." && pwd)
    else
        dirname "$(dirname "$(readlink -f "$nvcc")")"
    fi
}

# "12.4" from `nvcc --version` ("Cuda compilation tools, release 12.4, V12.4.131"), or "?".
horovod_nvcc_release() {
    "$1/bin/nvcc" --version 2>/dev/null | sed -n 's/.*release \([0-9][0-9]*\.[0-9][0-9]*\).*/\1/p' | head -n1 | grep . \
        || echo "?"
}

horovod_gpu_plan() {
    if [ "$TORCH_CUDA" = none ]; then
        HVD_FLAVOUR="$TORCH_LOCAL"
        return 0
    fi
    local ops="${HOROVOD_GPU_OPERATIONS:-NCCL}" cuda_home release
    HVD_FLAVOUR="cu${TORCH_CUDA//./}-$(echo "$ops" | tr 'A-Z' 'a-z')"
    HVD_GPU_ENV+=("HOROVOD_GPU_OPERATIONS=$ops")
    if cuda_home="$(horovod_find_nvcc)"; then
        release="$(horovod_nvcc_release "$cuda_home")"
        HVD_GPU_ENV+=("HOROVOD_CUDA_HOME=$cuda_home")
        HVD_GPU_NOTES+=("nvcc: $cuda_home/bin/nvcc (CUDA $release; torch was built with CUDA $TORCH_CUDA)")
        if [ "${release%%.*}" != "${TORCH_CUDA%%.*}" ]; then
            HVD_GPU_NOTES+=("WARNING: nvcc's CUDA major version ($release) differs from torch's ($TORCH_CUDA); set HOROVOD_CUDA_HOME to a CUDA ${TORCH_CUDA%%.*}.x toolkit")
        fi
    else
        HVD_GPU_PROBLEM="nvcc not found (torch has CUDA $TORCH_CUDA, Horovod's NCCL build compiles CUDA code): install NVIDIA's CUDA toolkit $TORCH_CUDA (https://developer.nvidia.com/cuda-downloads, package cuda-toolkit-${TORCH_CUDA//./-}) and put its bin/ on PATH or set HOROVOD_CUDA_HOME"
    fi
    [ "$ops" = NCCL ] || return 0
    HVD_GPU_ENV+=("HOROVOD_NCCL_LINK=${HOROVOD_NCCL_LINK:-SHARED}")
    if [ -n "${HOROVOD_NCCL_HOME:-}${HOROVOD_NCCL_INCLUDE:-}${HOROVOD_NCCL_LIB:-}" ]; then
        HVD_GPU_NOTES+=("NCCL: as given by HOROVOD_NCCL_HOME/HOROVOD_NCCL_INCLUDE/HOROVOD_NCCL_LIB")
        local v
        for v in HOROVOD_NCCL_HOME HOROVOD_NCCL_INCLUDE HOROVOD_NCCL_LIB; do
            [ -z "${!v:-}" ] || HVD_GPU_ENV+=("$v=${!v}")
        done
    elif [ "$NCCL_PKG" != none ] && [ -f "$NCCL_PKG/include/nccl.h" ] && compgen -G "$NCCL_PKG/lib/libnccl.so*" >/dev/null; then
        local lib="$NCCL_PKG/lib"
        if [ ! -e "$lib/libnccl.so" ]; then
            lib="$WORK/nccl-lib"
            mkdir -p "$lib"
            ln -sf "$(ls "$NCCL_PKG"/lib/libnccl.so.* | head -n1)" "$lib/libnccl.so"
        fi
        HVD_GPU_ENV+=("HOROVOD_NCCL_HOME=$NCCL_PKG" "HOROVOD_NCCL_INCLUDE=$NCCL_PKG/include" "HOROVOD_NCCL_LIB=$lib")
        HVD_GPU_NOTES+=("NCCL: torch's own nvidia-nccl package, $NCCL_PKG")
    else
        HVD_GPU_NOTES+=("NCCL: not in torch's wheel; Horovod's CMake searches the CUDA toolkit and system paths (set HOROVOD_NCCL_HOME if it is elsewhere)")
    fi
}

# The variables Horovod's build is given (one VAR=value per element, into HVD_BUILD_ENV): the same list
# is printed by --dry-run and passed to `pip wheel`.
horovod_build_env() {
    HVD_BUILD_ENV=(HOROVOD_WITH_PYTORCH=1 HOROVOD_WITH_GLOO=1 HOROVOD_WITHOUT_TENSORFLOW=1 HOROVOD_WITHOUT_MXNET=1)
    if [ "$HOROVOD_MPI" = 1 ]; then HVD_BUILD_ENV+=(HOROVOD_WITH_MPI=1); else HVD_BUILD_ENV+=(HOROVOD_WITHOUT_MPI=1); fi
    HVD_BUILD_ENV+=("HOROVOD_CMAKE=$(command -v cmake || echo '<cmake: apt-get installs it before the build>')"
                    "MAKEFLAGS=${MAKEFLAGS:--j$(nproc)}" "${HVD_GPU_ENV[@]}")
}

dry_run_horovod() {
    local wheel
    horovod_build_env
    log "dry run: horovod $HOROVOD_VERSION for torch $TORCH_VERSION (CUDA: $TORCH_CUDA), python $PY_TAG"
    log "  wheel cache: $HVD_WHEEL_DIR"
    wheel="$(ls "$HVD_WHEEL_DIR"/horovod-"$HOROVOD_VERSION"-*.whl 2>/dev/null | head -n1 || true)"
    log "  cached wheel: ${wheel:-none (a real run builds one)}"
    local note
    for note in "${HVD_GPU_NOTES[@]}"; do log "  $note"; done
    [ -z "$HVD_GPU_PROBLEM" ] || log "  a build would stop here: $HVD_GPU_PROBLEM"
    log "  build environment:"
    printf '    %s\n' "${HVD_BUILD_ENV[@]}"
}
