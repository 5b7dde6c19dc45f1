"""One cell's ranks started by ddlbench itself (docs/ARCHITECTURE.md, "Launcher"): one process per rank
(`python -P -m MODULE --cell cell.json --out CELL_DIR`) with its rank variables, on this box, or where a
Placement puts each rank (an argv prefix such as `nsenter --net=...` and extra variables: the testbed's
namespaces), supervised by ranks.run_ranks.

    result_json = launch_cell(cell, Path("results/r/cells/c"))          # every rank here
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from harness.contracts.cell import CellSpec
from harness.contracts.placement import Placement
from harness.core.errors import CellFailed, UserError
from harness.procs.argv import WORKER_MODULE, write_cell
from harness.procs.env import base_env, placed_now
from harness.procs.logs import log_tail
from harness.procs.ports import free_port
from harness.spawner.ranks import run_ranks
from harness.warm.spawn import RankStart


def _rank_env(cell: CellSpec, placement: Placement) -> dict:
    env = base_env(cell.threads, "local", placement.extra_env)
    if not placement.envs:
        # the cell's network profile names the interface of every library (harness/networks/profiles.py: on one
        # box `loopback`); gloo would otherwise bind whatever the hostname resolves to. A placement's own
        # per-rank interface (the testbed's) wins; so does one the user set (GLOO_SOCKET_IFNAME).
        # Ranks spawned here without a prefix all run on this box, whatever "nodes" they pretend to be
        box = 1 if not placement.prefixes else placement.nodes
        for var, value in cell.network_vars(box).items():
            env.setdefault(var, value)
    return env


def launch_cell(
    cell: CellSpec,
    cell_dir: Path,
    placement: Placement | None = None,
    module: str = WORKER_MODULE,
    abort: Callable[[], str | None] = lambda: None,
) -> Path:
    """Run every rank of `cell` (`python -m MODULE --cell cell.json --out cell_dir`); return the path of
    rank 0's result.json, or raise CellFailed (also when `abort()`, asked while the ranks run, gives a reason: a
    launcher's own cause to end the cell, as the testbed's link watch gives)."""
    placement = placement or Placement(nodes=cell.nodes)  # a multi-node cell on one box: its ranks say which "node"
    cell_dir = cell_dir.resolve()
    spec_path = write_cell(cell, cell_dir)
    result = cell_dir / "result.json"
    if result.exists():
        result.unlink()
    world = cell.workers + cell.servers
    port = free_port()
    per_node = -(-cell.workers // placement.nodes)
    ranks, placed = {}, placed_now()
    for r in range(world):
        env = _rank_env(cell, placement)
        env.update(
            RANK=str(r),
            WORLD_SIZE=str(world),
            LOCAL_RANK=str(r % per_node if r < cell.workers else 0),
            LOCAL_WORLD_SIZE=str(min(per_node, world)),
            GROUP_WORLD_SIZE=str(placement.nodes),
            MASTER_ADDR=placement.master_addr,
            MASTER_PORT=str(port),
            NODE_RANK=str(r // per_node if r < cell.workers else 0),
        )
        if r < len(placement.envs):
            env.update(placement.envs[r])
        env.update(placed)
        prefix = tuple(placement.prefixes[r]) if r < len(placement.prefixes) else ()
        ranks[r] = RankStart(module, ("--cell", str(spec_path), "--out", str(cell_dir)), env, prefix)
    run_ranks(cell, cell_dir, ranks, abort)
    if not result.exists():
        raise CellFailed("rank 0 finished without writing result.json", log_tail(cell_dir))
    return result


def place_one_box(cell: CellSpec) -> CellSpec:
    """A cell as one box places it: refused when it asks for dedicated server hosts, since no host of one box
    is spare (docs/ARCHITECTURE.md, "Server placement")."""
    if cell.servers and getattr(cell, "server_hosts", "auto") == "dedicated":
        raise UserError(
            "--server-hosts dedicated needs a host without workers, and one box has none: run on "
            "the testbed (--testbed, `testbed:` in the sweep file) or in a Slurm allocation with a "
            "spare node, or use --server-hosts colocated/auto"
        )
    return cell
