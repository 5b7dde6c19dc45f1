"""Dense peak FLOP rates by device and dtype, and model FLOPs utilisation
(docs/ARCHITECTURE.md, "Host-bound cells and MFU").

MFU = FLOPs per sample x samples per second per device / the device's dense peak for the cell's compute
dtype (torchtitan's definition; Korthikanti et al. 2022). The peak is the vendor's dense figure (no 2:4
sparsity): for `fp32` cells, which run with TF32 off (harness/contracts/training.py), the FP32 rate of the CUDA cores;
for `bf16`, the tensor cores' BF16 rate with FP32 accumulation. A device or dtype not in the table gets no
MFU rather than a guessed one, and an MFU above 100% is refused: it means a wrong peak or a wrong clock.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Peak:
    pattern: str
    """Regular expression matched (case-insensitive) against torch.cuda.get_device_name()."""
    tflops: dict
    """dtype -> dense TFLOP/s; a dtype the device has no fast path for is absent."""
    source: str
    """Where the figures come from."""


PEAKS: tuple[Peak, ...] = (
    # most specific names first: "H100 NVL" and "H100 PCIe" before plain "H100" (SXM)
    Peak(
        r"H100.*NVL",
        {"fp32": 60.0, "bf16": 835.0},
        "NVIDIA H100 NVL datasheet: FP32 60 TF, BF16 1,671 TF with sparsity (835 dense)",
    ),
    Peak(
        r"H100.*PCIe",
        {"fp32": 51.2, "bf16": 756.0},
        "NVIDIA H100 datasheet, PCIe: FP32 51 TF, BF16 1,513 TF with sparsity (756 dense)",
    ),
    Peak(
        r"H100",
        {"fp32": 66.9, "bf16": 989.4},
        "NVIDIA H100 datasheet, SXM: FP32 67 TF, BF16 1,979 TF with sparsity (989 dense)",
    ),
    Peak(
        r"H200.*NVL",
        {"fp32": 60.0, "bf16": 835.0},
        "NVIDIA H200 datasheet, NVL: FP32 60 TF, BF16 1,671 TF with sparsity (835 dense)",
    ),
    Peak(
        r"H200",
        {"fp32": 66.9, "bf16": 989.4},
        "NVIDIA H200 datasheet, SXM: FP32 67 TF, BF16 1,979 TF with sparsity (989 dense)",
    ),
    Peak(
        r"A100",
        {"fp32": 19.5, "bf16": 312.0},
        "NVIDIA A100 datasheet (SXM and PCIe, 40 and 80 GB): FP32 19.5 TF, BF16 312 TF dense",
    ),
    Peak(
        r"L40S",
        {"fp32": 91.6, "bf16": 362.0},
        "NVIDIA L40S datasheet: FP32 91.6 TF, BF16 733 TF with sparsity (362 dense)",
    ),
    Peak(
        r"\bL4\b",
        {"fp32": 30.3, "bf16": 121.0},
        "NVIDIA L4 datasheet: FP32 30.3 TF, BF16 242 TF with sparsity (121 dense)",
    ),
    Peak(
        r"RTX 4090",
        {"fp32": 82.6, "bf16": 165.2},
        "NVIDIA Ada GPU architecture whitepaper, GeForce RTX 4090: FP32 82.6 TF, BF16 tensor with FP32 "
        "accumulate 165.2 TF dense",
    ),
    Peak(
        r"RTX 3090",
        {"fp32": 35.6, "bf16": 71.0},
        "NVIDIA Ampere GA102 whitepaper, GeForce RTX 3090: FP32 35.6 TF, BF16 tensor with FP32 accumulate 71 TF dense",
    ),
    Peak(
        r"RTX 2080 Ti",
        {"fp32": 13.4},
        "NVIDIA Turing architecture whitepaper, GeForce RTX 2080 Ti: FP32 13.4 TF (4352 cores x 1545 MHz "
        "boost x 2); Turing has no BF16",
    ),
    Peak(r"V100", {"fp32": 15.7}, "NVIDIA V100 datasheet, SXM2: FP32 15.7 TF (PCIe 14); Volta has no BF16"),
)


class ImpossibleMFU(ValueError):
    """An MFU above 100%: the peak or the measured time is wrong."""


def peak_tflops(device_name: str, dtype: str) -> float | None:
    """The dense peak of this device for this compute dtype, or None when the table does not know it."""
    for p in PEAKS:
        if re.search(p.pattern, device_name or "", flags=re.IGNORECASE):
            return p.tflops.get(dtype)
    return None


def mfu(flops_per_sample: float | None, samples_per_s_per_device: float, device_name: str, dtype: str) -> float | None:
    """Model FLOPs utilisation (a fraction) of one device, or None when the device, its peak for the dtype
    or the FLOP count is unknown. Raises ImpossibleMFU above 1."""
    peak = peak_tflops(device_name, dtype)
    if peak is None or not flops_per_sample or flops_per_sample != flops_per_sample:
        return None
    u = flops_per_sample * samples_per_s_per_device / (peak * 1e12)
    if u > 1.0:
        raise ImpossibleMFU(
            f"MFU {u:.0%} on {device_name} ({dtype}, peak {peak:g} TFLOP/s): above 100% means "
            f"a wrong peak or a wrong clock; no MFU recorded"
        )
    return u


def single_model(gpu_models: str) -> str:
    """The GPU name of a cell whose ranks all ran on one model ('2 x NVIDIA H200' -> 'NVIDIA H200'),
    '' for a CPU cell or a mix of models (their MFU would be an average of unlike devices)."""
    parts = [p.strip() for p in (gpu_models or "").split(";") if p.strip()]
    if len(parts) != 1:
        return ""
    m = re.match(r"\d+\s*x\s*(.+)", parts[0])
    return m.group(1).strip() if m else parts[0]
