"""Single-box launcher: spawn one process per rank, watch them, and end the cell on the first failure
or at its timeout (a crashed or hung rank never hangs the sweep).

Placement (optional) lets another launcher run ranks elsewhere, e.g. inside the emulated testbed's
network namespaces: for each rank an argv prefix (such as nsenter ...) and extra environment.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from harness.cell import CellSpec
from harness.errors import CellFailed

LOG_TAIL_LINES = 30


@dataclass(frozen=True)
class Placement:
    master_addr: str = "127.0.0.1"
    """Address rank 0 listens on for the rendezvous."""
    prefixes: tuple = ()
    """Per rank: argv prefix that runs the rank where it belongs (empty = this host)."""
    envs: tuple = ()
    """Per rank: extra environment variables (e.g. GLOO_SOCKET_IFNAME)."""
    nodes: int = 1
    """Hosts the ranks span."""
    extra_env: dict = field(default_factory=dict)
    """Environment for every rank."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch_cell(cell: CellSpec, cell_dir: Path, placement: Placement | None = None,
                module: str = "harness.worker") -> Path:
    """Run every rank of `cell` (`python -m MODULE --cell cell.json --out cell_dir`); return the path of
    rank 0's result.json, or raise CellFailed."""
    placement = placement or Placement()
    cell_dir = cell_dir.resolve()
    cell_dir.mkdir(parents=True, exist_ok=True)
    spec_path = cell_dir / "cell.json"
    spec_path.write_text(cell.to_json())
    result = cell_dir / "result.json"
    if result.exists():
        result.unlink()
    world = cell.workers + cell.servers
    port = free_port()
    per_node = -(-cell.workers // placement.nodes)
    procs: list[subprocess.Popen] = []
    logs = []
    try:
        for r in range(world):
            env = dict(os.environ)
            env.update(placement.extra_env)
            env.update(
                RANK=str(r), WORLD_SIZE=str(world), LOCAL_RANK=str(r % per_node if r < cell.workers else 0),
                LOCAL_WORLD_SIZE=str(min(per_node, world)), GROUP_WORLD_SIZE=str(placement.nodes),
                MASTER_ADDR=placement.master_addr,
                MASTER_PORT=str(port), DDLBENCH_LAUNCHER="local",
                OMP_NUM_THREADS=str(cell.threads), MKL_NUM_THREADS=str(cell.threads),
                NODE_RANK=str(r // per_node if r < cell.workers else 0),
            )
            env.pop("TORCHELASTIC_RUN_ID", None)
            if r < len(placement.envs):
                env.update(placement.envs[r])
            prefix = list(placement.prefixes[r]) if r < len(placement.prefixes) else []
            argv = prefix + [sys.executable, "-m", module, "--cell", str(spec_path),
                             "--out", str(cell_dir)]
            log = open(cell_dir / f"rank{r}.log", "w")
            logs.append(log)
            procs.append(subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env,
                                          start_new_session=True))
        _watch(procs, cell.timeout_s, cell_dir)
    finally:
        _kill(procs)
        for log in logs:
            log.close()
    if not result.exists():
        raise CellFailed("rank 0 finished without writing result.json", log_tail(cell_dir))
    return result


def _watch(procs: list[subprocess.Popen], timeout_s: float, cell_dir: Path) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        codes = [p.poll() for p in procs]
        bad = [(r, c) for r, c in enumerate(codes) if c not in (None, 0)]
        if bad:
            r, c = bad[0]
            what = f"signal {-c}" if c < 0 else f"exit code {c}"
            raise CellFailed(f"rank {r} died ({what})", log_tail(cell_dir, first=r))
        if all(c == 0 for c in codes):
            return
        if time.monotonic() > deadline:
            running = [r for r, c in enumerate(codes) if c is None]
            raise CellFailed(f"timed out after {timeout_s:g} s with rank(s) {running} still running",
                             log_tail(cell_dir, first=running[0]))
        time.sleep(0.05)


def _kill(procs: list[subprocess.Popen]) -> None:
    for p in procs:
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    for p in procs:
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass


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
