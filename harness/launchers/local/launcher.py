"""Single-box launcher: spawn one process per rank, watch them, and end the cell on the first failure
or at its timeout (a crashed or hung rank never hangs the sweep).

Placement (optional) lets another launcher run ranks elsewhere, e.g. inside the emulated testbed's
network namespaces: for each rank an argv prefix (such as nsenter ...) and extra environment.

No rank outlives the driver (docs/ARCHITECTURE.md, "Launching"): ranks run in sessions of their own
and are killed by process group when the cell ends, fails or is interrupted (SIGTERM/SIGINT reach the
`finally` as exceptions, see harness.experiment.execute.signals_raise), and the kernel kills them if the driver
itself is SIGKILLed (parent-death signal, below).
"""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path
from typing import Callable

from harness.contracts.cell import CellSpec
from harness.contracts.placement import Placement
from harness.core.errors import CellFailed, UserError
from harness.warm import spawn
from harness.contracts.launcher import Launcher, LauncherEntry, register
from harness.contracts.recipes import recipe
from harness.launchers.local.recipe import LocalRecipe
from harness.warm.spawn import RankStart
from harness.procs.processes import (
    WORKER_MODULE,
    base_env,
    free_port,
    log_tail,
    placed_now,
    with_rank_error,
)
from harness.procs.supervisor import Ended, Proc, how, watch

def _rank_env(cell: CellSpec, placement: "Placement") -> dict:
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


def launch_cell(cell: CellSpec, cell_dir: Path, placement: Placement | None = None,
                module: str = WORKER_MODULE) -> Path:
    """Run every rank of `cell` (`python -m MODULE --cell cell.json --out cell_dir`); return the path of
    rank 0's result.json, or raise CellFailed."""
    placement = placement or Placement(nodes=cell.nodes)  # a multi-node cell on one box: its ranks say which "node"
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
    ranks, placed = {}, placed_now()
    for r in range(world):
        env = _rank_env(cell, placement)
        env.update(
            RANK=str(r), WORLD_SIZE=str(world), LOCAL_RANK=str(r % per_node if r < cell.workers else 0),
            LOCAL_WORLD_SIZE=str(min(per_node, world)), GROUP_WORLD_SIZE=str(placement.nodes),
            MASTER_ADDR=placement.master_addr, MASTER_PORT=str(port),
            NODE_RANK=str(r // per_node if r < cell.workers else 0),
        )
        if r < len(placement.envs):
            env.update(placement.envs[r])
        env.update(placed)
        prefix = tuple(placement.prefixes[r]) if r < len(placement.prefixes) else ()
        ranks[r] = RankStart(module, ("--cell", str(spec_path), "--out", str(cell_dir)), env, prefix)
    run_ranks(cell, cell_dir, ranks)
    if not result.exists():
        raise CellFailed("rank 0 finished without writing result.json", log_tail(cell_dir))
    return result


def run_ranks(cell: CellSpec, cell_dir: Path, ranks: dict[int, RankStart],
              abort: Callable[[], str | None] = lambda: None, poll_s: float = 0.05) -> None:
    """Start each rank (its output in CELL_DIR/rank<r>.log, in a session of its own; warm or cold,
    warm/spawn.py) and hand them to the one supervisor until they all exit; CellFailed when one fails,
    the cell times out, or `abort()` gives a reason. Every rank started here is killed when this returns
    or raises. The local, testbed and multi-node launchers all start their ranks here."""
    procs: dict[int, subprocess.Popen] = {}
    logs = []
    try:
        for r, rank in ranks.items():
            path = cell_dir / f"rank{r}.log"
            log = open(path, "w")
            logs.append(log)
            procs[r] = spawn.start(rank, path, log)
        _watch(procs, cell.timeout_s, cell_dir, abort, poll_s)
    finally:
        _kill(list(procs.values()))
        for log in logs:
            log.close()


def launch_one_box(cell: CellSpec, cell_dir: Path, placement: Placement | None = None) -> Path:
    """The local launcher: the backend's own single-box launcher where its `LocalRecipe` has one
    (horovodrun, the deepspeed launcher), else `launch_cell`."""
    return (recipe(cell.backend, LocalRecipe).launch or launch_cell)(cell, cell_dir, placement)


def _watch(procs: dict[int, subprocess.Popen], timeout_s: float, cell_dir: Path,
           abort: Callable[[], str | None] = lambda: None, poll_s: float = 0.05) -> None:
    """The ranks under the one supervisor (procs/supervisor.py); CellFailed when the cell fails."""
    def died(r: int):
        return lambda code: Ended(with_rank_error(f"rank {r} died ({how(code)})", cell_dir, r), r)

    def timed_out(running: list[Proc]) -> Ended:
        left = [int(p.name.split()[1]) for p in running]
        return Ended(f"timed out after {timeout_s:g} s with rank(s) {left} still running", left[0])
    try:
        watch([Proc(p, f"rank {r}", f"rank{r}.log", died(r)) for r, p in procs.items()], timeout_s, cell_dir,
              timed_out, abort=abort, poll_s=poll_s)
    except Ended as e:
        first = e.rank if e.rank is not None else min(procs, default=None)
        raise CellFailed(e.reason, log_tail(cell_dir, first=first) if first is not None else "") from None


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


def check_one_box(cell) -> None:
    """On one box no host is spare: refuse dedicated server hosts (docs/ARCHITECTURE.md, "Server placement")."""
    if cell.servers and getattr(cell, "server_hosts", "auto") == "dedicated":
        raise UserError("--server-hosts dedicated needs a host without workers, and one box has none: run on "
                        "the testbed (--testbed, `testbed:` in the sweep file) or in a Slurm allocation with a "
                        "spare node, or use --server-hosts colocated/auto")


register(LauncherEntry(
    "local", "every rank on this box (a backend's own single-box launcher where it has one); the default "
             "outside a Slurm allocation",
    make=lambda request: Launcher("local", None, None, {}, check_one_box), detect=lambda request: True))
