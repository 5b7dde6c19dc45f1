"""Starting and supervising the ranks one node runs for a cell of the multi-node launcher
(harness/launch/nodes.py): their rank variables, and a watch that also ends them when the cell failed on
another node (`abort`)."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

from harness.backends import BACKENDS
from harness.cell import CellSpec
from harness.errors import CellFailed
from harness.launch.local import PACKAGE_ROOT, rank_argv
from harness.launch.supervise import WORKER_MODULE, base_env, log_tail, with_rank_error
from harness.launch.watch import Ended, Proc, how, watch

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
        def died(r: int):
            return lambda code: Ended(with_rank_error(f"rank {r} died ({how(code)})", cell_dir, r), r)

        def timed_out(running: list[Proc]) -> Ended:
            left = [int(p.name.split()[1]) for p in running]
            return Ended(f"timed out after {cell.timeout_s:g} s with rank(s) {left} still running", left[0])
        try:  # the one supervisor (launch/watch.py)
            watch([Proc(p, f"rank {r}", f"rank{r}.log", died(r)) for r, p in procs.items()], cell.timeout_s,
                  cell_dir, timed_out, abort=abort, poll_s=POLL_S)
        except Ended as e:
            first = e.rank if e.rank is not None else (ranks[0] if ranks else None)
            raise CellFailed(e.reason, log_tail(cell_dir, first=first) if first is not None else "") from None
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
