"""Starting and supervising the ranks one node runs for a cell of the multi-node launcher
(harness/launchers/nodes/launcher.py): their rank variables, and a watch that also ends them when the cell failed on
another node (`abort`)."""

from __future__ import annotations

from pathlib import Path

from harness.contracts import backend
from harness.contracts.cell import CellSpec
from harness.procs.argv import WORKER_MODULE, write_cell
from harness.procs.env import base_env, placed_now
from harness.spawner.ranks import run_ranks as spawn_ranks
from harness.warm.spawn import RankStart

POLL_S = 0.1
"""How often a node looks at its ranks and the store while it supervises or waits."""


def rank_env(cell: CellSpec, rank: int, nodes: list[int], master: str, port: int) -> dict:
    """The variables of `rank` when the cell's ranks run on `nodes` (one node index per rank)."""
    mine = nodes[rank]
    workers_here = [r for r in range(cell.workers) if nodes[r] == mine]
    ranks_here = [r for r in range(len(nodes)) if nodes[r] == mine]
    env = base_env(cell.threads, "nodes", cell.network_vars(len(set(nodes))))
    env.update(
        RANK=str(rank),
        WORLD_SIZE=str(len(nodes)),
        MASTER_ADDR=master,
        MASTER_PORT=str(port),
        LOCAL_RANK=str(workers_here.index(rank) if rank < cell.workers else 0),
        LOCAL_WORLD_SIZE=str(len(ranks_here)),
        NODE_RANK=str(mine),
        GROUP_WORLD_SIZE=str(max(nodes[: cell.workers]) + 1),
    )
    env.update(backend.rank_env(cell))
    return env


def run_ranks(cell: CellSpec, cell_dir: Path, ranks: list[int], env_of, abort) -> None:
    """Start `ranks` of `cell` on this node and supervise them until they all exit 0; CellFailed when one
    fails, the cell times out, or `abort()` returns a reason (the cell failed elsewhere). Every rank
    started here is killed when this returns or raises (the spawner's `run_ranks`, harness/spawner/ranks.py)."""
    spec = write_cell(cell, cell_dir)
    args, placed = ("--cell", str(spec), "--out", str(cell_dir)), placed_now()
    spawn_ranks(
        cell,
        cell_dir,
        {r: RankStart(WORKER_MODULE, args, {**env_of(r), **placed}) for r in ranks},
        abort=abort,
        poll_s=POLL_S,
    )
