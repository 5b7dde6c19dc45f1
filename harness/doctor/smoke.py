"""Smoke cells: one tiny cell per usable backend x scheme, each ok, failed or skipped with its reason.

Smoke cells: one tiny cell per usable backend x scheme on the detected device, run through the
project's own path (cell.resolve -> execute.run_cells -> the summary rows), each ok or failed with its
reason. A backend that is not usable here is reported as skipped with its reason, never run.

    cfg = SmokeConfig(workload="bert-base-tiny", device="cpu", quick=True)
    cells, skipped = plan(cfg, backend_facts("cpu"))
    results = run(cells, run_dir) + skipped      # [SmokeResult(backend, scheme, status, reason, wall_s)]
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from harness.contracts.cell import CellSpec
from harness.core.errors import UserError
from harness.experiment.cells import resolve
from harness.experiment.execute import run_cells
from harness.experiment.options import RunOptions
from harness.results.paths import new_run_id
from harness.schemes import SCHEMES
from workloads import WORKLOADS

DEVICES = ("auto", "cpu", "cuda")


@dataclass(frozen=True)
class SmokeConfig:
    """The shape of every smoke cell: small enough that a cell is mostly start-up."""

    workload: str = "bert-base-tiny"
    """Workload of every cell (a -tiny one on CPU)."""
    device: str = "cpu"
    """cpu | cuda, already detected (see `detect_device`)."""
    workers: int = 2
    """Workers per cell: the fewest that communicate."""
    batch: int = 2
    """Per-worker batch, samples."""
    warmup: int = 1
    """Discarded iterations."""
    iters: int = 2
    """Measured iterations."""
    timeout_s: float = 60.0
    """Limit of one cell, start-up included, seconds (a hung rank fails its cell after it)."""
    quick: bool = False
    """Only one scheme per backend (the first all-reduce one, see `schemes_for`)."""


@dataclass(frozen=True)
class SmokeResult:
    backend: str
    """Backend of the cell."""
    scheme: str
    """Scheme of the cell (for a skipped backend: every scheme it would have run, comma-separated)."""
    status: str
    """ok | failed | skipped."""
    reason: str = ""
    """Why it failed or was skipped (one line)."""
    wall_s: float | None = None
    """Wall time of the cell, start-up included, seconds."""

    def as_dict(self) -> dict:
        return asdict(self)


def detect_device(device: str) -> str:
    """auto -> cuda when torch sees a GPU, else cpu; UserError for an unknown name or cuda without CUDA."""
    if device not in DEVICES:
        raise UserError(f"unknown device {device!r}: use {', '.join(DEVICES)} (--device)")
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise UserError("--device cuda was given but torch sees no CUDA device here; use --device cpu or auto")
    return device


def config_for(workload: str, device: str, quick: bool, timeout_s: float = SmokeConfig.timeout_s) -> SmokeConfig:
    """A SmokeConfig after checking the user's choices (UserError names the known workloads)."""
    WORKLOADS.get(workload)
    device = detect_device(device)
    if not math.isfinite(timeout_s) or timeout_s <= 0:
        raise UserError(
            f"--timeout must be a finite number of seconds > 0, got {timeout_s!r}: a smoke cell "
            f"without a limit could hang the doctor; give e.g. --timeout 120"
        )
    workers = min(2, torch.cuda.device_count()) if device == "cuda" else 2  # one worker per GPU
    return SmokeConfig(workload=workload, device=device, workers=workers, timeout_s=timeout_s, quick=quick)


def schemes_for(backend: str, quick: bool) -> list[str]:
    """Schemes that communicate and run on `backend` (the `local` baseline does not); with `quick` only
    the first, all-reduce before parameter-server ones (fewer processes, the backend's own transport)."""
    names = sorted(
        (s.parameter_server, name) for name, s in SCHEMES.items() if s.communicates and backend in s.backends
    )
    names = [name for _, name in names]
    return names[:1] if quick else sorted(names)


def plan(cfg: SmokeConfig, backends: list[dict]) -> tuple[list[CellSpec], list[SmokeResult]]:
    """Resolved cells to run, and the results known without running: skipped backends (not available,
    or not on this device) and cells that cannot be set up (failed, with resolve's reason).
    `backends` is facts.backend_facts(device)."""
    cells, known = [], []
    for b in backends:
        schemes = schemes_for(b["name"], cfg.quick)
        why = b["reason"] or b["device_reason"]
        if why:
            known.append(SmokeResult(b["name"], ", ".join(schemes), "skipped", why))
            continue
        for scheme in schemes:
            spec = CellSpec(
                workload=cfg.workload,
                scheme=scheme,
                backend=b["name"],
                workers=cfg.workers,
                batch=cfg.batch,
                warmup=cfg.warmup,
                iters=cfg.iters,
                timeout_s=cfg.timeout_s,
                device=cfg.device,
                network="loopback",
            )
            try:
                cells.append(resolve(spec))
            except UserError as e:
                known.append(SmokeResult(b["name"], scheme, "failed", f"cannot set up the cell: {e}"))
    return cells, known


def run(cells: list[CellSpec], run_dir: Path, progress: bool = True) -> list[SmokeResult]:
    """Run the cells into `run_dir` with execute.run_cells and read each summary row's status and reason."""
    if not cells:
        return []
    rows = run_cells(cells, run_dir, RunOptions(progress=progress), new_run=True, run_id=new_run_id("doctor"))
    by_id = {r["cell_id"]: r for r in rows}
    out = []
    for c in cells:
        r = by_id.get(c.cell_id, {})
        reason = "" if r.get("status") == "ok" else str(r.get("reason") or "no summary row was recorded")
        out.append(
            SmokeResult(
                c.backend,
                c.scheme,
                str(r.get("status") or "failed"),
                reason.splitlines()[0] if reason else "",
                r.get("wall_s"),
            )
        )
    return out


def order(results: list[SmokeResult]) -> list[SmokeResult]:
    """Results grouped by backend, then scheme, as the report lists them."""
    return sorted(results, key=lambda r: (r.backend, r.scheme))
