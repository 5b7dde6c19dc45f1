"""The checks only a GPU can make, named so that a CPU machine's doctor reports them as not run.

The checks only a GPU can make (the first GPU run must be right), named so that a CPU
machine's doctor says they were not run instead of staying silent about them. Pure data and one pure
function; the checks live in the GPU test module (`python -m pytest -m gpu tests`), and the one-GPU ones
also in harness/doctor/gpu_probe.py, which doctor runs on a CUDA node (status `ran: ...`)."""

from __future__ import annotations

from dataclasses import dataclass

GPU_TEST_COMMAND = "python -m pytest -m gpu tests"
"""How the GPU test module is run (pytest marker `gpu`); the doctor names it, it does not run it."""


@dataclass(frozen=True)
class GpuCheck:
    name: str
    """Short name shown in the report."""
    checks: str
    """What a pass proves, in one line."""
    min_gpus: int = 1
    """GPUs it needs on one node."""


GPU_CHECKS = (
    GpuCheck(
        "stream-correct timing",
        "phases timed by CUDA events on the compute stream agree within 5% "
        "with a synchronised wall clock (doctor runs it; also test_event_timing_agrees_...)",
    ),
    GpuCheck(
        "TF32 off for fp32",
        "conv and matmul precision set from the cell's dtype: fp32 cells run "
        "without TF32 (Ampere and newer default cuDNN convs to TF32); doctor compares with float64",
    ),
    GpuCheck(
        "device rule",
        "a rank's GPU from its local rank and the visible devices, made current (harness/contracts/devices.py)",
    ),
    GpuCheck(
        "NCCL process group",
        "a CUDA cell's workers' group really moves CUDA tensors over NCCL "
        "(dist.get_backend, chosen from the device's type), world size 1 (doctor runs it)",
    ),
    GpuCheck(
        "exposed communication",
        "comm_wait_s/forward_wait_s and the overlap ratio non-trivial for "
        "wfbp/mgwfbp/bytescheduler on a socket-only NCCL cell",
        min_gpus=2,
    ),
    GpuCheck(
        "NCCL credit window",
        "ByteScheduler's credit returns on real NCCL completion, so the window "
        "bounds bytes in flight (partition start/end trace)",
        min_gpus=2,
    ),
    GpuCheck("GPU test module (-m gpu)", "every scheme lossless at 2 GPUs over NCCL, Horovod with NCCL", min_gpus=2),
)


def gpu_check_status(gpus: int) -> list[dict]:
    """Each GPU-only check with its status on a machine with `gpus` CUDA devices (0 = none). Pure."""
    out = []
    for c in GPU_CHECKS:
        if gpus == 0:
            status = "not run: no CUDA device"
        elif gpus < c.min_gpus:
            status = f"not run: needs {c.min_gpus} GPUs, this node has {gpus}"
        else:
            status = f"not run by doctor: run `{GPU_TEST_COMMAND}` on this node"
        out.append({"name": c.name, "checks": c.checks, "status": status})
    return out
