"""How a rank process starts (docs/ARCHITECTURE.md, "Warm ranks"): warm, forked from one pre-imported
zygote (harness/warm/), or cold, a fresh interpreter (`python -P -m harness.rank.worker`).

`warm_ranks(enabled)` is entered around a run's cells (execute.run_cells). Inside it, every worker rank
the local spawner starts (one box, the testbed's namespaces, a node of the multi-node launcher) is a new
process forked from the zygote: fresh process group, model, optimizer, allocator, hooks and threads; only
the imports are shared. The zygote is started as the block is entered, importing while the driver
prepares the run (the first cell's start-up pays what is left of it), and again at the next rank after it
dies (the cell that lost it failed like any cell whose rank was killed). Cold instead: outside
`warm_ranks`, with `enabled=False` (`--cold`), off the driver's main thread (the kernel's parent-death
signal follows the thread that started the zygote), for a module other than the worker, and for a
placement prefix other than entering a network namespace.

Every rank, warm or cold, gets procs/env.PLACED_AT_VAR (from procs/env.placed_now): the wall time its
cell's ranks began to be placed, from which the worker records `startup_s` (placement to the first
warm-up iteration).
"""

from __future__ import annotations

import atexit
import contextlib
import subprocess
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from harness.procs.argv import WORKER_MODULE, python_argv
from harness.procs.cgjoin import split_prefix
from harness.procs.env import RANK_START_VAR
from harness.procs.trampoline import orphan_proof
from harness.warm.client import PoolDead, WarmPool

_NSENTER = "nsenter"
T = TypeVar("T")


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
    """The active `warm_ranks` block: whether it is on, and its pool once started (a block nested in an
    enabled one forks from the outer block's pool, but keeps and closes its own launcher resources)."""

    def __init__(self, enabled: bool, parent: _Warm | None = None):
        self.enabled = enabled
        self.parent = parent
        self.resources: dict[str, object] = {}
        """A launcher's own warm ranks (the srun launcher's zygote per node), by key; closed with the block."""
        self.pool: WarmPool | None = None
        self.started = 0
        """Zygotes started in this block (the first, and one after each that died)."""

    def get(self, wait: bool = True) -> WarmPool:
        if self.parent is not None:
            return self.parent.get(wait)
        if self.pool is not None and not self.pool.alive:
            self.pool.close()
            self.pool = None
        if self.pool is None:
            self.pool = _adopt() or WarmPool(wait=wait)
            self.started += 1
        return self.pool


_active: list[_Warm] = []
_early: list[WarmPool] = []
"""A zygote started before the command's imports (harness/cli/entry.py), for the run's block to adopt."""


def start_early() -> None:
    """Start this box's zygote now (from the main thread, before the command line's imports): the first
    `warm_ranks` block that forks here adopts it; one that does not (cold, or srun) closes it, and so does
    the end of the process."""
    if not _early and threading.current_thread() is threading.main_thread():
        _early.append(WarmPool(wait=False))
        atexit.register(_close_early)


def _adopt() -> WarmPool | None:
    while _early:
        pool = _early.pop()
        if pool.alive:
            return pool
        pool.close()
    return None


def _close_early() -> None:
    while _early:
        _early.pop().close()


@contextlib.contextmanager
def warm_ranks(enabled: bool = True, here: bool = True) -> Iterator[_Warm]:
    """Ranks started inside are warm (module docstring); nested blocks share the outer block's zygote
    when both are on. With `here`, this box's zygote starts at once (False: the launcher starts its ranks
    elsewhere, e.g. srun's zygote per node, `resource`). The zygotes and their ranks are ended on the way out."""
    outer = _active[-1] if _active else None
    block = _Warm(enabled, parent=outer if (outer is not None and outer.enabled and enabled) else None)
    if block.enabled and here and threading.current_thread() is threading.main_thread():
        block.get(wait=False)  # it imports while the driver prepares the run; the first rank waits for it
    elif not (block.enabled and here):
        _close_early()  # nothing here will fork from it: it must not take CPU from what is measured
    _active.append(block)
    try:
        yield block
    finally:
        _active.pop()
        for res in block.resources.values():
            res.close()
        if block.pool is not None:  # only the outermost block of a nest owns a pool
            block.pool.close()


def resource(key: str, make: Callable[[], T]) -> T | None:
    """A launcher's warm-rank machinery for the active `warm_ranks` block (made at its first use, closed
    as the block ends), or None when ranks start cold (outside a block, or --cold)."""
    block = _active[-1] if _active else None
    if block is None or not block.enabled:
        return None
    if key not in block.resources:
        block.resources[key] = make()
    return block.resources[key]


def netns_of(prefix: tuple) -> str | None:
    """The network namespace path of an `nsenter --net=PATH --` prefix (followed or not by a join of control
    groups, procs/cgjoin.py: the testbed's CPU share per host), else None."""
    placed = _placed(prefix)
    return placed[0] if placed else None


def _placed(prefix: tuple) -> tuple[str | None, tuple[str, ...]] | None:
    """(namespace path or None, control groups' procs files) of a prefix a forked rank can do itself: empty,
    `nsenter --net=PATH --`, a cgjoin prefix, or the first followed by the second; else None."""
    prefix = tuple(prefix)
    netns = None
    if len(prefix) >= 3 and prefix[0] == _NSENTER and prefix[1].startswith("--net=") and prefix[2] == "--":
        netns, prefix = prefix[1].removeprefix("--net="), prefix[3:]
    groups, rest = split_prefix(prefix)
    return (netns, groups) if not rest else None


def _warm_for(rank: RankStart) -> _Warm | None:
    block = _active[-1] if _active else None
    if block is None or not block.enabled or rank.module != WORKER_MODULE:
        return None
    if threading.current_thread() is not threading.main_thread():
        return None
    return block if _placed(rank.prefix) is not None else None


def start(rank: RankStart, log_path: Path, log) -> subprocess.Popen:
    """Start `rank`, its output in `log_path` (`log`, the open file, for a cold start); the result is a
    Popen or a WarmProc (the same interface), leading its own session either way."""
    block = _warm_for(rank)
    if block is not None:
        env = {**rank.env, RANK_START_VAR: "warm"}
        netns, groups = _placed(rank.prefix)
        where = dict(netns=netns, cgroups=groups)
        try:
            return block.get().spawn(rank.module, list(rank.args), env, log_path, **where)
        except PoolDead:  # died between the check and the spawn: one more try with a new zygote
            return block.get().spawn(rank.module, list(rank.args), env, log_path, **where)
    return subprocess.Popen(
        rank.argv(),
        stdout=log,
        stderr=subprocess.STDOUT,
        env={**rank.env, RANK_START_VAR: "cold"},
        start_new_session=True,
    )
