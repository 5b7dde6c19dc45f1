"""How a rank process starts (docs/ARCHITECTURE.md, "Warm ranks"): warm, forked from one pre-imported
zygote (harness/warm/), or cold, a fresh interpreter (`python -P -m harness.worker`).

`warm_ranks(enabled)` is entered around a run's cells (execute.run_cells). Inside it, every worker rank
the local spawner starts (one box, the testbed's namespaces, a node of the multi-node launcher) is a new
process forked from the zygote: fresh process group, model, optimizer, allocator, hooks and threads; only
the imports are shared. The zygote is started as the block is entered, importing while the driver
prepares the run (the first cell's start-up pays what is left of it), and again at the next rank after it
dies (the cell that lost it failed like any cell whose rank was killed). Cold instead: outside
`warm_ranks`, with `enabled=False` (`--cold`), off the driver's main thread (the kernel's parent-death
signal follows the thread that started the zygote), for a module other than the worker, and for a
placement prefix other than entering a network namespace.

Every rank, warm or cold, gets supervise.PLACED_AT_VAR (from supervise.placed_now): the wall time its
cell's ranks began to be placed, from which the worker records `startup_s` (placement to the first
warm-up iteration).
"""

from __future__ import annotations

import contextlib
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from harness.launch.supervise import RANK_START_VAR, WORKER_MODULE, orphan_proof, python_argv
from harness.warm.client import PoolDead, WarmPool
_NSENTER = "nsenter"


@dataclass(frozen=True)
class RankStart:
    """One rank to start: `prefix + python -P -m module args` cold, the same forked from the zygote warm."""

    module: str
    args: tuple
    env: dict
    prefix: tuple = ()
    """An argv prefix that runs the rank where it belongs (the testbed: `nsenter --net=PATH --`)."""

    def argv(self) -> list[str]:
        return [*self.prefix, *orphan_proof([*python_argv(), "-m", self.module, *self.args])]


class _Warm:
    """The active `warm_ranks` block: whether it is on, and its pool once started."""

    def __init__(self, enabled: bool):
        self.enabled = enabled
        self.pool: WarmPool | None = None
        self.started = 0
        """Zygotes started in this block (the first, and one after each that died)."""

    def get(self, wait: bool = True) -> WarmPool:
        if self.pool is not None and not self.pool.alive:
            self.pool.close()
            self.pool = None
        if self.pool is None:
            self.pool = WarmPool(wait=wait)
            self.started += 1
        return self.pool


_active: list[_Warm] = []


@contextlib.contextmanager
def warm_ranks(enabled: bool = True) -> Iterator[_Warm]:
    """Ranks started inside are warm (module docstring); nested blocks share the outer block's zygote
    when both are on. The zygote and its ranks are ended on the way out."""
    outer = _active[-1] if _active else None
    block = outer if (outer is not None and outer.enabled and enabled) else _Warm(enabled)
    if block.enabled and block is not outer and threading.current_thread() is threading.main_thread():
        block.get(wait=False)  # it imports while the driver prepares the run; the first rank waits for it
    _active.append(block)
    try:
        yield block
    finally:
        _active.pop()
        if block is not outer and block.pool is not None:
            block.pool.close()


def netns_of(prefix: tuple) -> str | None:
    """The network namespace path of an `nsenter --net=PATH --` prefix, else None."""
    if len(prefix) == 3 and prefix[0] == _NSENTER and prefix[1].startswith("--net=") and prefix[2] == "--":
        return prefix[1].removeprefix("--net=")
    return None


def _warm_for(rank: RankStart) -> _Warm | None:
    block = _active[-1] if _active else None
    if block is None or not block.enabled or rank.module != WORKER_MODULE:
        return None
    if threading.current_thread() is not threading.main_thread():
        return None
    return block if (not rank.prefix or netns_of(rank.prefix)) else None


def start(rank: RankStart, log_path: Path, log) -> subprocess.Popen:
    """Start `rank`, its output in `log_path` (`log`, the open file, for a cold start); the result is a
    Popen or a WarmProc (the same interface), leading its own session either way."""
    block = _warm_for(rank)
    if block is not None:
        env = {**rank.env, RANK_START_VAR: "warm"}
        try:
            return block.get().spawn(rank.module, list(rank.args), env, log_path, netns=netns_of(rank.prefix))
        except PoolDead:  # died between the check and the spawn: one more try with a new zygote
            return block.get().spawn(rank.module, list(rank.args), env, log_path, netns=netns_of(rank.prefix))
    return subprocess.Popen(rank.argv(), stdout=log, stderr=subprocess.STDOUT, env={**rank.env, RANK_START_VAR: "cold"},
                            start_new_session=True)
