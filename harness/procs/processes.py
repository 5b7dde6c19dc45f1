"""Generic supervision of one cell whose ranks are started by a framework's own launcher (horovodrun,
the deepspeed launcher, ...): docs/ARCHITECTURE.md, "Launching".

A backend builds the launcher's argv and environment; `run_supervised` runs it with the cell's timeout,
kills the launcher and everything it started when the cell ends, and turns a failure into CellFailed
with the log's tail. The launcher's combined output (all ranks) goes to CELL_DIR/rank0.log.

Its processes are watched by the one supervisor, harness/procs/supervisor.py.

This module knows no backend and imports nothing of the harness but its errors and the supervisor, so
that backends may use it without import cycles.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil

from harness.core.atomic import write_text_atomic
from harness.core.errors import CellFailed
from harness.procs.supervisor import Ended, Proc, how, watch

LOG_TAIL_LINES = 30
"""Lines of the failing rank's log kept in a failed cell's row."""
WORKER_MODULE = "harness.rank.worker"
"""The rank entry point every launcher starts."""
# Our own launcher's rank variables: a framework launcher sets its own, ours must not leak into the ranks.
OUR_RANK_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "NODE_RANK", "GROUP_RANK",
                 "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RUN_ID")


PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])
"""Where this driver's harness/ and workloads/ live: every rank, whoever starts it (our spawner, horovodrun,
the deepspeed launcher), imports exactly this code (-P keeps the working directory off sys.path, this goes
first on PYTHONPATH), not whatever an install elsewhere points at; recorded as package_path."""


PLACED_AT_VAR = "DDLBENCH_PLACED_AT"
"""time.time() when the launcher began placing the cell's ranks (docs/ARCHITECTURE.md, "Warm ranks"):
every launcher sets it, the worker records `startup_s` from it."""
RANK_START_VAR = "DDLBENCH_RANK_START"
"""How the rank was started, `warm` (forked from the zygote) or `cold`; unset = cold (warm/spawn.py)."""


def placed_now() -> dict[str, str]:
    """The variable that dates a cell's placement (PLACED_AT_VAR), for every rank of a cell placed now."""
    return {PLACED_AT_VAR: repr(time.time())}


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port free on `host` right now (the OS picks it)."""
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def usable_port(port: int, on_this_host: bool) -> int:
    """`port`, or the next free one when rank 0 will listen on this very host and it is taken."""
    if not on_this_host:
        return port
    for p in range(port, port + 64):
        with socket.socket() as s:
            try:
                s.bind(("", p))
                return p
            except OSError:
                continue
    return port


def log_tail(cell_dir: Path, first: int = 0, lines: int = LOG_TAIL_LINES) -> str:
    """The last lines of the failing rank's log (then rank 0's), for the failed row."""
    out = []
    names = [f"rank{first}.log"] + (["rank0.log"] if first != 0 else [])
    for name in names:
        path = cell_dir / name
        if path.exists():
            text = path.read_text(errors="replace").splitlines()[-lines:]
            out.append(f"--- {name} ---\n" + "\n".join(text))
    return "\n".join(out)


def rank_error(cell_dir: Path, rank: int) -> str | None:
    """The one-line `error: ...` a rank printed before it stopped (harness/rank/worker.py prints a UserError
    so: a profile naming a missing interface, a refused loopback route), else None."""
    path = cell_dir / f"rank{rank}.log"
    if not path.exists():
        return None
    lines = [ln.strip() for ln in path.read_text(errors="replace").splitlines() if ln.strip().startswith("error: ")]
    return lines[-1].removeprefix("error: ") if lines else None


def crash_site(cell_dir: Path, rank: int) -> str | None:
    """Where a rank crashed in native code, from the stack faulthandler wrote into its log (harness/rank/worker.py):
    'Fatal Python error: Segmentation fault, in full_tensor (torch/distributed/...:12), from final_parameters
    (harness/schemes/fsdp.py:99)': the innermost frame and, when that is not the project's, the innermost of
    the project's frames. None when the log has no such stack."""
    path = cell_dir / f"rank{rank}.log"
    if not path.exists():
        return None
    lines = path.read_text(errors="replace").splitlines()
    fatal = [i for i, ln in enumerate(lines) if ln.startswith("Fatal Python error:")]
    if not fatal:
        return None
    frames = []
    for ln in lines[fatal[-1] + 1:]:
        m = re.match(r'\s*File "(.+)", line (\d+) in (\S+)', ln)
        if m:  # the crashing thread comes first, innermost frame first ("most recent call first")
            frames.append(f"{m.group(3)} ({_short(m.group(1))}:{m.group(2)})")
        elif frames and not ln.strip():
            break  # the end of the crashing thread's stack
    what = lines[fatal[-1]].strip()
    if not frames:
        return what
    ours = next((f for f in frames if "(harness/" in f or "(workloads/" in f), None)
    return f"{what}, in {frames[0]}" + (f", from {ours}" if ours and ours != frames[0] else "")


def _short(path: str) -> str:
    """A source path from the project's package down ('harness/schemes/fsdp.py'), else its last two parts."""
    parts = Path(path).parts
    for root in ("harness", "workloads", "torch", "deepspeed", "horovod"):
        if root in parts:
            return "/".join(parts[parts.index(root):])
    return "/".join(parts[-2:])


def with_rank_error(reason: str, cell_dir: Path, rank: int | None) -> str:
    """`reason`, followed by what the rank said was wrong when it said so, or where it crashed."""
    said = (rank_error(cell_dir, rank) or crash_site(cell_dir, rank)) if rank is not None else None
    return f"{reason}: {said}" if said else reason


def launcher_exe(name: str) -> str:
    """The console script next to this interpreter (so it runs the same python), else on PATH."""
    exe = Path(sys.executable).parent / name
    return str(exe) if exe.exists() else name


# The trampoline asks the kernel to SIGKILL the rank when its parent (the driver) dies (prctl(2),
# PR_SET_PDEATHSIG = 1; the setting survives execve), then checks that the driver (argv[1]) is still its
# parent: a driver killed between fork and prctl has already handed the rank to a reaper, and would
# never signal it (prctl(2) says to check getppid() after the call). A parent other than the driver is
# accepted only while the driver still runs (a placement prefix that forks). Then it execs the rank.
# A trampoline rather than a preexec_fn: preexec_fn is unsafe in a process with threads (Python's
# subprocess docs), and the progress bar runs one.
_TRAMPOLINE = """import ctypes, os, signal, sys
ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)
driver = int(sys.argv[1])
if os.getppid() != driver:
    try:
        with open(f"/proc/{driver}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        state = "X"
    if state in ("Z", "X"):
        os._exit(70)
os.execv(sys.argv[2], sys.argv[2:])
"""


def orphan_proof(argv: list[str]) -> list[str]:
    """`argv` started behind the parent-death trampoline: it dies with this process, even by SIGKILL."""
    exe = argv[0] if os.path.isabs(argv[0]) else (shutil.which(argv[0]) or argv[0])
    return [*python_argv(), "-c", _TRAMPOLINE, str(os.getpid()), exe, *argv[1:]]


def python_argv() -> list[str]:
    """This interpreter, in safe-path mode (-P): a rank imports the installed harness, never a stray
    `harness/` folder in its working directory."""
    return [sys.executable, "-P"]


CELL_FILE = "cell.json"
"""The cell spec a rank reads (`--cell CELL_DIR/cell.json`), written by `write_cell` only."""


def write_cell(cell, cell_dir: Path) -> Path:
    """Write CELL_DIR/cell.json for the cell's ranks (creating CELL_DIR), atomically; returns its path. Every
    launcher writes it through here."""
    cell_dir.mkdir(parents=True, exist_ok=True)
    return write_text_atomic(cell_dir / CELL_FILE, cell.to_json())


def worker_argv(cell_dir: Path, module: str = WORKER_MODULE) -> list[str]:
    """`-m harness.rank.worker --cell CELL_DIR/cell.json --out CELL_DIR` (without the interpreter)."""
    return ["-m", module, "--cell", str(cell_dir / CELL_FILE), "--out", str(cell_dir)]


def base_env(threads: int, launcher: str, extra: dict | None = None) -> dict:
    """This process's environment without our own rank variables, plus thread counts and the launcher's
    name (recorded as the rank's source)."""
    env = {k: v for k, v in os.environ.items() if k not in OUR_RANK_VARS}
    env.update(OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads), PYTHONUNBUFFERED="1",
               PYTHONSAFEPATH="1", DDLBENCH_LAUNCHER=launcher)
    env.update(extra or {})
    env["PYTHONPATH"] = os.pathsep.join([PACKAGE_ROOT, *filter(None, [env.get("PYTHONPATH")])])
    env.update(placed_now())
    return env


def prepare_cell_dir(cell, cell_dir: Path, placement) -> Path:
    """The cell directory with cell.json, for a launcher that runs on one box only."""
    if placement is not None and (placement.prefixes or placement.nodes > 1):
        raise CellFailed("this backend's launcher runs on one box only; the testbed/multi-node placement "
                         "is not supported for it", "")
    cell_dir = cell_dir.resolve()
    write_cell(cell, cell_dir)
    return cell_dir


def run_supervised(argv: list[str], env: dict, timeout_s: float, cell_dir: Path, what: str) -> Path:
    """Run `argv` (a launcher that starts every rank) in CELL_DIR; return result.json or raise CellFailed."""
    cell_dir = cell_dir.resolve()
    result = cell_dir / "result.json"
    result.unlink(missing_ok=True)
    with open(cell_dir / "rank0.log", "w") as log:
        log.write("$ " + " ".join(argv) + "\n")
        log.flush()
        proc = subprocess.Popen(orphan_proof(argv), stdout=log, stderr=subprocess.STDOUT, env=env,
                                start_new_session=True)
        try:
            watch([Proc(proc, what, "rank0.log", lambda code: Ended(f"{what} failed ({how(code)})", None))],
                  timeout_s, cell_dir, lambda running: Ended(f"{what} timed out after {timeout_s:g} s", None),
                  poll_s=0.1)
        except Ended as e:
            kill_tree(proc)  # first, so that the tail holds what the ranks printed last
            raise CellFailed(e.reason, log_tail(cell_dir)) from None
        finally:
            kill_tree(proc)  # stragglers (a launcher may exit before all of its ranks)
    if not result.exists():
        raise CellFailed(f"{what} finished without rank 0 writing result.json", log_tail(cell_dir))
    return result


def kill_group(pid: int) -> None:
    """SIGKILL the process group `pid` leads (a rank, the warm-rank zygote), or `pid` alone when it leads
    none yet (a child between fork and setsid)."""
    for kill in (os.killpg, os.kill):
        try:
            kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def kill_tree(proc: subprocess.Popen) -> None:
    """Kill a launcher and its descendants. Launchers start ranks in sessions of their own (horovodrun
    does), so killing the launcher's process group alone would leave them running."""
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
