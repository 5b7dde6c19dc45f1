"""Starting and supervising the ranks one node runs for a cell of the multi-node launcher
(harness/launch/nodes.py): their rank variables, and a watch that also ends them when the cell failed on
another node (`abort`)."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

from harness.backends import BACKENDS
from harness.cell import CellSpec
from harness.errors import CellFailed
from harness.launch.local import PACKAGE_ROOT, rank_argv
from harness.launch.supervise import WORKER_MODULE, base_env, log_tail, with_rank_error

POLL_S = 0.1
"""How often a node looks at its ranks and the store while it supervises or waits."""


def rank_env(cell: CellSpec, rank: int, nodes: list[int], master: str, port: int) -> dict:
    """The variables of `rank` when the cell's ranks run on `nodes` (one node index per rank)."""
    mine = nodes[rank]
    workers_here = [r for r in range(cell.workers) if nodes[r] == mine]
    ranks_here = [r for r in range(len(nodes)) if nodes[r] == mine]
    env = base_env(cell.threads, "nodes", cell.network_vars(len(set(nodes))))
    env["PYTHONPATH"] = os.pathsep.join([PACKAGE_ROOT, *filter(None, [env.get("PYTHONPATH")])])
    env.update(RANK=str(rank), WORLD_SIZE=str(len(nodes)), MASTER_ADDR=master, MASTER_PORT=str(port),
               LOCAL_RANK=str(workers_here.index(rank) if rank < cell.workers else 0),
               LOCAL_WORLD_SIZE=str(len(ranks_here)), NODE_RANK=str(mine),
               GROUP_WORLD_SIZE=str(max(nodes[:cell.workers]) + 1))
    env.update(BACKENDS.get(cell.backend).launch_env(cell))
    return env


def run_ranks(cell: CellSpec, cell_dir: Path, ranks: list[int], env_of, abort) -> None:
    """Start `ranks` of `cell` on this node and supervise them until they all exit 0; CellFailed when one
    fails, the cell times out, or `abort()` returns a reason (the cell failed elsewhere). Every rank
    started here is killed when this returns or raises."""
    cell_dir.mkdir(parents=True, exist_ok=True)
    spec = cell_dir / "cell.json"
    spec.write_text(cell.to_json())
    procs, logs = {}, []
    try:
        for r in ranks:
            log = open(cell_dir / f"rank{r}.log", "w")
            logs.append(log)
            procs[r] = subprocess.Popen(rank_argv(WORKER_MODULE, "--cell", str(spec), "--out", str(cell_dir)),
                                        stdout=log, stderr=subprocess.STDOUT, env=env_of(r), start_new_session=True)
        deadline = time.monotonic() + cell.timeout_s
        while True:
            for r, p in procs.items():
                c = p.poll()
                if c not in (None, 0):
                    what = f"signal {-c}" if c < 0 else f"exit code {c}"
                    raise CellFailed(with_rank_error(f"rank {r} died ({what})", cell_dir, r),
                                     log_tail(cell_dir, first=r))
            if all(p.poll() == 0 for p in procs.values()):
                return
            why = abort()
            if why:
                raise CellFailed(why, log_tail(cell_dir, first=ranks[0]) if ranks else "")
            if time.monotonic() > deadline:
                running = [r for r, p in procs.items() if p.poll() is None]
                raise CellFailed(f"timed out after {cell.timeout_s:g} s with rank(s) {running} still running",
                                 log_tail(cell_dir, first=running[0]))
            time.sleep(POLL_S)
    finally:
        for p in procs.values():
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        for p in procs.values():
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        for log in logs:
            log.close()
