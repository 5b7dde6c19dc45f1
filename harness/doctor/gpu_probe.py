"""The few GPU checks `ddlbench doctor` runs itself, in seconds on one GPU.

The GPU checks doctor runs itself, in a few seconds on one GPU (the others need the GPU test module):
event timing against a synchronised wall clock, TF32 really off for fp32 (a matmul and a convolution
compared with float64), and the device rule. `run_gpu_checks` returns gpu_checks' list with the status of
each check doctor ran replaced by `ran: ok` or `ran: FAILED (...)`."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import torch
import torch.distributed as dist
import torch.nn.functional as F

from harness.contracts.devices import process_group_backend, rank_device, tensor_backend
from harness.contracts.training import set_precision
from harness.doctor.gpu_checks import gpu_check_status
from harness.measure.timer import IterationTimer, make_clock

TOLERANCE = 0.05
"""Events and the synchronised wall clock agree within 5% (as the GPU test module asks)."""
FP32_REL_ERR = 1e-4
"""fp32 accumulations of these sizes stay well under this relative error; TF32 (10-bit mantissa) does not."""


def events_vs_wall(device: torch.device, reps: int = 10) -> str:
    """'' when the event-timed span of a GPU-bound step, read the way the loop reads it (after the window),
    equals the synchronised wall clock within 5%."""
    a = torch.randn(2048, 2048, device=device)
    timer = IterationTimer(make_clock(device))

    def step() -> None:
        for _ in range(8):
            a.matmul(a).tanh_()

    step()
    events, walls = [], []
    for _ in range(reps):
        timer.start_window()  # synchronised: the wall clock below starts with an idle device
        t0 = time.perf_counter()
        timer.begin()
        step()
        timer.phase("step")
        timer.end()
        events.append(timer.finish()[0]["step"])
        walls.append(time.perf_counter() - t0)
    e, w = statistics.median(events), statistics.median(walls)
    return "" if abs(e - w) <= TOLERANCE * w else f"events {e * 1e3:.2f} ms, synchronised wall {w * 1e3:.2f} ms"


def fp32_without_tf32(device: torch.device) -> str:
    """'' when an fp32 cell's precision flags are off and fp32 matmul and convolution match float64."""
    flags = set_precision("fp32")
    if any(flags.values()):
        return f"TF32 flags on for an fp32 cell: {flags}"
    torch.manual_seed(0)
    x, w = torch.randn(512, 4096, device=device), torch.randn(4096, 512, device=device)
    img, k = torch.randn(8, 64, 32, 32, device=device), torch.randn(64, 64, 3, 3, device=device)
    errs = {}
    for name, f in (("matmul", lambda p, q: p @ q), ("conv", lambda p, q: F.conv2d(p, q, padding=1))):
        p, q = (x, w) if name == "matmul" else (img, k)
        got, ref = f(p, q).double(), f(p.double(), q.double())
        errs[name] = float((got - ref).norm() / ref.norm())
    bad = {n: e for n, e in errs.items() if e > FP32_REL_ERR}
    return "" if not bad else "relative error " + ", ".join(f"{n} {e:.1e}" for n, e in bad.items()) + " (TF32?)"


def nccl_group(device: torch.device) -> str:
    """'' when the process group a CUDA cell's ranks join moves CUDA tensors over NCCL (world size 1, the
    backend chosen by harness/contracts/devices.py from the device's type) and an all-reduce through it works."""
    if dist.is_initialized():
        return "a process group is already initialised in this process"
    dist.init_process_group(backend=process_group_backend(device), store=dist.HashStore(), rank=0, world_size=1)
    try:
        raw = str(dist.get_backend())
        actual = tensor_backend(raw, device.type)
        x = torch.ones(1024, device=device)
        dist.all_reduce(x)
        total = float(x.sum())  # .item() synchronises with the collective
    finally:
        dist.destroy_process_group()
    if actual != "nccl":
        return f"CUDA tensors go through {actual or 'nothing'!r}, not NCCL (dist.get_backend: {raw})"
    return "" if total == 1024 else f"all-reduce of ones over 1 rank summed to {total}, not 1024"


def device_rule(device: torch.device) -> str:
    dev = rank_device(0, "cuda")
    return "" if torch.cuda.current_device() == dev.index else f"set_device left {torch.cuda.current_device()}"


RUNNABLE: dict[str, Callable[[torch.device], str]] = {
    "stream-correct timing": events_vs_wall,
    "TF32 off for fp32": fp32_without_tf32,
    "device rule": device_rule,
    "NCCL process group": nccl_group,
}
"""Check name (gpu_checks.GPU_CHECKS) -> what doctor runs for it on cuda:0 ('' = passed)."""


def run_gpu_checks(gpus: int) -> list[dict]:
    checks = gpu_check_status(gpus)
    if gpus < 1:
        return checks
    device = torch.device("cuda", 0)
    for c in checks:
        fn = RUNNABLE.get(c["name"])
        if fn is None:
            continue
        try:
            problem = fn(device)
        except Exception as e:  # a broken GPU stack is a finding, not a doctor crash
            problem = f"{type(e).__name__}: {e}"
        c["status"] = "ran: ok" if not problem else f"ran: FAILED ({problem})"
        c["ran"] = True
    return checks
