"""Start a cell through a framework's own single-box launcher, the way its users do:
`horovodrun -np W -H localhost:W --gloo python -m harness.worker ...` (and, for DeepSpeed, the `deepspeed`
launcher). Supervised like harness.launch.local: a timeout or a failing launcher ends the cell with
CellFailed and the log's tail; the launcher and every process it started are killed.

The launcher's combined output (all ranks, prefixed by the launcher) goes to CELL_DIR/rank0.log.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from harness.cell import CellSpec
from harness.errors import CellFailed
from harness.launch.local import log_tail

# Our own launcher's rank variables: a framework launcher sets its own, ours must not leak into the ranks.
_OURS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "NODE_RANK", "GROUP_RANK", "MASTER_ADDR",
         "MASTER_PORT", "TORCHELASTIC_RUN_ID")


def launcher_exe(name: str) -> str:
    """The console script next to this interpreter (so it runs the same python), else on PATH."""
    exe = Path(sys.executable).parent / name
    return str(exe) if exe.exists() else name


def base_env(cell: CellSpec, launcher: str, extra: dict | None = None) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in _OURS}
    env.update(OMP_NUM_THREADS=str(cell.threads), MKL_NUM_THREADS=str(cell.threads), PYTHONUNBUFFERED="1",
               DDLBENCH_LAUNCHER=launcher)
    env.update(extra or {})
    return env


def run_supervised(argv: list[str], env: dict, cell: CellSpec, cell_dir: Path, what: str) -> Path:
    """Run `argv` (a launcher that starts every rank) in CELL_DIR; return result.json or raise CellFailed."""
    cell_dir = cell_dir.resolve()
    result = cell_dir / "result.json"
    if result.exists():
        result.unlink()
    with open(cell_dir / "rank0.log", "w") as log:
        log.write("$ " + " ".join(argv) + "\n")
        log.flush()
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env,
                                start_new_session=True)
        try:
            code = proc.wait(timeout=cell.timeout_s)
        except subprocess.TimeoutExpired:
            _kill_tree(proc)
            raise CellFailed(f"{what} timed out after {cell.timeout_s:g} s", log_tail(cell_dir)) from None
        finally:
            _kill_tree(proc)  # stragglers (a launcher may exit before all of its ranks)
    if code != 0:
        what_ = f"signal {-code}" if code < 0 else f"exit code {code}"
        raise CellFailed(f"{what} failed ({what_})", log_tail(cell_dir))
    if not result.exists():
        raise CellFailed(f"{what} finished without rank 0 writing result.json", log_tail(cell_dir))
    return result


def _kill_tree(proc: subprocess.Popen) -> None:
    """Kill the launcher and its descendants. Launchers start ranks in sessions of their own (horovodrun
    does), so killing the launcher's process group alone would leave them running."""
    import psutil

    try:
        kids = psutil.Process(proc.pid).children(recursive=True)
    except psutil.NoSuchProcess:
        kids = []
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGTERM)  # lets the launcher stop its ranks itself
            proc.wait(timeout=5)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            pass
    if proc.poll() is None:
        proc.kill()
    for p in kids:
        try:
            p.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(kids, timeout=10)
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass


def worker_argv(cell_dir: Path) -> list[str]:
    return ["-m", "harness.worker", "--cell", str(cell_dir / "cell.json"), "--out", str(cell_dir)]


def prepare(cell: CellSpec, cell_dir: Path, placement) -> Path:
    if placement is not None and (placement.prefixes or placement.nodes > 1):
        raise CellFailed("this backend's launcher runs on one box only; the testbed/multi-node placement "
                         "is not supported for it", "")
    cell_dir = cell_dir.resolve()
    cell_dir.mkdir(parents=True, exist_ok=True)
    (cell_dir / "cell.json").write_text(cell.to_json())
    return cell_dir


def launch_horovodrun(cell: CellSpec, cell_dir: Path, placement=None) -> Path:
    """`horovodrun -np W -H localhost:W --gloo [--fusion-threshold-mb N --cycle-time-ms T] python -m
    harness.worker ...`: the `horovod` scheme's knobs become horovodrun's own flags (which set
    HOROVOD_FUSION_THRESHOLD / HOROVOD_CYCLE_TIME for every rank before hvd.init())."""
    cell_dir = prepare(cell, cell_dir, placement)
    w = cell.workers
    argv = [launcher_exe("horovodrun"), "-np", str(w), "-H", f"localhost:{w}", "--gloo"]
    knobs = cell.knobs or {}
    if knobs.get("fusion_threshold_mb") is not None:
        argv += ["--fusion-threshold-mb", str(int(knobs["fusion_threshold_mb"]))]
    if knobs.get("cycle_time_ms") is not None:
        argv += ["--cycle-time-ms", str(float(knobs["cycle_time_ms"]))]
    argv += [sys.executable] + worker_argv(cell_dir)
    return run_supervised(argv, base_env(cell, "horovodrun"), cell, cell_dir, "horovodrun")
