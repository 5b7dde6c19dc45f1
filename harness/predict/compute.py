"""One worker's compute, as the simulator needs it: per-layer forward times in forward order, the
time each gradient becomes ready after the start of backward, the backward and optimizer totals.

Two sources (docs/ARCHITECTURE.md, "Predictor"):
- a measured profile (`ddlbench profile`): its times, optionally scaled so that the single-device
  iteration matches a given throughput (calibration to another device);
- FLOP and byte counts per layer plus a device preset: each interval costs max(flops / peak,
  bytes / memory bandwidth) (a roofline per interval), and the whole is scaled so that the
  single-device iteration matches the preset's measured throughput. Only the balance between the
  two rates shapes the per-layer split; the calibration sets the level.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from harness.core.errors import UserError
from harness.predict.profile_table import PROFILE_COLUMNS, PROFILE_OPTIONAL
from harness.sim.model import ComputeModel


@dataclass(frozen=True)
class DevicePreset:
    name: str
    """Preset name."""
    peak_tflops: float
    """Sustained fp32 matmul rate, TFLOP/s (sets the roofline's compute side)."""
    mem_gbyte_s: float
    """Memory bandwidth, GB/s (the roofline's memory side)."""
    throughput: dict
    """workload -> (samples/s on one device, batch, seq_len): the calibration measurements."""
    source: str = ""
    """Where the numbers come from."""


DEVICES: dict[str, DevicePreset] = {
    d.name: d
    for d in [
        DevicePreset(
            "study-gpu",
            13.4,
            616.0,
            {"resnet50": (253.1, 64, None), "bert-base": (212.8, 64, 64), "bert-large": (49.0, 8, 64)},
            "single-GPU throughputs of the study's testbed (Shi et al., IEEE Network 2021, arXiv 2005.13247) at its "
            "batch sizes; the roofline balance (13.4 TFLOP/s fp32, 616 GB/s) is that of a 2018 desktop-class GPU "
            "(RTX 2080 Ti datasheet) and only splits time between layers: the throughput sets the level",
        ),
        DevicePreset(
            "v100",
            15.7,
            900.0,
            {},
            "NVIDIA V100 SXM2 datasheet: 15.7 TFLOP/s fp32, 900 GB/s HBM2; give --throughput to calibrate",
        ),
    ]
}


def get_device(name: str) -> DevicePreset:
    if name not in DEVICES:
        raise UserError(f"unknown device preset {name!r}: known presets are {', '.join(sorted(DEVICES))}")
    return DEVICES[name]


def _layers(df: pd.DataFrame):
    by_layer = df.sort_values("param_index").groupby("layer_index", sort=False)
    layers = []
    for j, g in by_layer:
        layers.append((int(g["forward_order"].iloc[0]), int(j), tuple(int(i) for i in g["param_index"])))
    layers.sort()
    return layers


def from_profile(df: pd.DataFrame) -> ComputeModel:
    """The measured times of a profile table (source=measured)."""
    _check(df)
    if df["forward_s"].isna().all():
        raise UserError(
            "this profile has no measured times (source=counted): give --device-preset or "
            "--throughput to turn its FLOP counts into times"
        )
    df = df.sort_values("param_index")
    layers = _layers(df)
    fwd = df.groupby("layer_index")["forward_s"].sum()
    opt = df.groupby("layer_index")["optimizer_s"].sum()
    return ComputeModel(
        workload=str(df["workload"].iloc[0]),
        sample_unit=str(df["sample_unit"].iloc[0]),
        batch=int(df["batch"].iloc[0]),
        seq_len=_seq(df),
        grad_bytes=tuple(int(b) for b in df["grad_bytes"]),
        numels=tuple(int(n) for n in df["numel"]),
        ready_order=tuple(int(i) for i in df.sort_values(["ready_order", "param_index"])["param_index"]),
        ready_s=tuple(float(t) for t in df["ready_s"]),
        backward_total_s=float(df["backward_total_s"].iloc[0]),
        layers=tuple(m for _, _, m in layers),
        layer_forward_s=tuple(float(fwd[j]) for _, j, _ in layers),
        layer_optimizer_s=tuple(float(opt[j]) for _, j, _ in layers),
        flops_per_sample=float(df["flops"].sum()) / int(df["batch"].iloc[0]),
        device=str(df["device"].iloc[0]),
        layer_names=_layer_names(df, layers),
        param_names=tuple(str(n) for n in df["param_name"]),
    )


def from_counts(df: pd.DataFrame, device: DevicePreset) -> ComputeModel:
    """Times from FLOP and byte counts on a roofline (uncalibrated: call .calibrated next)."""
    _check(df)
    df = df.sort_values("param_index")
    peak = device.peak_tflops * 1e12
    mem = device.mem_gbyte_s * 1e9

    def cost(flops, nbytes):
        return max(flops / peak, nbytes / mem)

    layers = _layers(df)
    fwd = df.groupby("layer_index")[["forward_flops", "forward_mem_bytes"]].sum()
    opt = df.groupby("layer_index")["optimizer_mem_bytes"].sum()
    ready = [0.0] * len(df)
    t = 0.0
    bwd = {int(r.param_index): cost(r.backward_flops, r.backward_mem_bytes) for r in df.itertuples()}
    order = [int(i) for i in df.sort_values(["ready_order", "param_index"])["param_index"]]
    for i in order:
        t += bwd[i]
        ready[i] = t
    return ComputeModel(
        workload=str(df["workload"].iloc[0]),
        sample_unit=str(df["sample_unit"].iloc[0]),
        batch=int(df["batch"].iloc[0]),
        seq_len=_seq(df),
        grad_bytes=tuple(int(b) for b in df["grad_bytes"]),
        numels=tuple(int(n) for n in df["numel"]),
        ready_order=tuple(order),
        ready_s=tuple(ready),
        backward_total_s=t,
        layers=tuple(m for _, _, m in layers),
        layer_forward_s=tuple(cost(fwd.loc[j, "forward_flops"], fwd.loc[j, "forward_mem_bytes"]) for _, j, _ in layers),
        layer_optimizer_s=tuple(opt[j] / mem for _, j, _ in layers),
        flops_per_sample=float(df["flops"].sum()) / int(df["batch"].iloc[0]),
        device=device.name,
        layer_names=_layer_names(df, layers),
        param_names=tuple(str(n) for n in df["param_name"]),
    )


def _layer_names(df: pd.DataFrame, layers) -> tuple:
    name = df.groupby("layer_index")["layer"].first()
    return tuple(str(name[j]) for _, j, _ in layers)


def _seq(df) -> int | None:
    v = df["seq_len"].iloc[0]
    return None if pd.isna(v) else int(v)


def _check(df: pd.DataFrame) -> None:
    missing = [c for c in PROFILE_COLUMNS if c not in df.columns and c not in PROFILE_OPTIONAL]
    if missing:
        raise UserError(
            f"not a profile table (missing {', '.join(missing[:4])}...): make one with "
            f"`ddlbench profile WORKLOAD -o FILE.parquet`"
        )
    if df["workload"].nunique() != 1:
        raise UserError("a profile table must hold one workload; split it per workload")


def compute_model(
    df: pd.DataFrame,
    device: str | None = None,
    throughput: float | None = None,
    batch: int | None = None,
    mode: str = "auto",
) -> ComputeModel:
    """The compute model for a profile table.

    mode: `profile` uses the measured per-layer times, `flops` the roofline of the counts;
    `auto` = profile when the table has times, else flops. With a device preset (or an explicit
    throughput) the result is calibrated: batch / throughput = one worker's iteration.
    """
    workload = str(df["workload"].iloc[0])
    has_times = not df["forward_s"].isna().all()
    if mode == "auto":
        mode = "profile" if has_times else "flops"
    preset = get_device(device) if device else None
    if mode == "flops":
        if preset is None:
            raise UserError("FLOP-based compute needs a device preset (--device-preset) for its roofline")
        model = from_counts(df, preset)
    elif mode == "profile":
        model = from_profile(df)
    else:
        raise UserError(f"unknown compute mode {mode!r}: use profile, flops or auto")
    if throughput is None and preset is not None:
        if workload not in preset.throughput:
            known = ", ".join(sorted(preset.throughput)) or "none"
            raise UserError(
                f"device preset {preset.name!r} has no measured throughput for {workload!r} "
                f"(it has: {known}); give --throughput SAMPLES_PER_S measured on one device"
            )
        throughput, preset_batch, _ = preset.throughput[workload]
        batch = batch or preset_batch
    if throughput is not None:
        return model.calibrated(throughput, batch or model.batch, preset.name if preset else "calibrated")
    if batch and batch != model.batch:  # no calibration: per-layer time taken as linear in the batch
        return model.scaled(batch / model.batch, batch)
    return model
