"""Node 0 of a multi-node job without Slurm (harness/launchers/nodes/launcher.py has the protocol): it
publishes each cell's ranks per node, runs its own, waits for the others' outcomes and ends the job."""

from __future__ import annotations

import json
import os
import secrets
import socket
import time
from pathlib import Path

from harness.contracts.backend import recipe
from harness.contracts.cell import CellSpec
from harness.contracts.recipes.nodes import NodesRecipe
from harness.core.atomic import write_json_atomic
from harness.core.errors import CellFailed, UserError
from harness.launchers.nodes.env import NodeJob, rank_nodes
from harness.launchers.nodes.meeting import (
    BEAT_S,
    GRACE_S,
    LOST_S,
    Heart,
    NodesFailed,
    Notes,
    _get,
    _put,
    address_towards,
)
from harness.launchers.nodes.ranks import POLL_S, rank_env, run_ranks
from harness.launchers.nodes.secret import seal
from harness.procs.logs import log_tail
from harness.procs.ports import free_port


def check_cell(cell: CellSpec, job: NodeJob) -> None:
    """UserError before anything runs for a cell this launcher cannot place."""
    refusal = recipe(cell.backend, NodesRecipe).refuse
    if refusal:
        raise UserError(refusal)
    rank_nodes(cell, job.nnodes, job.nproc_per_node)


class Leader:
    """Node 0: the launcher `run_cells` calls for each cell, over the store (see the module docstring)."""

    def __init__(self, store, job: NodeJob, join_timeout_s: float, secret: bytes | None = None):
        self.store, self.job, self.secret = store, job, secret
        self.n = 0
        self.lost: str | None = None
        self.gone: list[int] = []  # the nodes declared lost (no heartbeat): they will never say bye
        self.addr = address_towards(job.master_addr)
        _put(store, "node/0", {"host": socket.gethostname(), "cores": os.cpu_count()})
        self.heart = Heart(store, job)
        self._join(join_timeout_s)
        # every node's nonce, which each cell/N is signed with (harness/launchers/nodes/secret.py)
        # (node 0's own too: the nodes read it from each cell/N and check node 0's notes with it)
        self.nonces = {0: secrets.token_hex(16)}
        self.nonces.update({k: str(_get(store, f"node/{k}").get("nonce", "")) for k in range(1, job.nnodes)})
        self.notes = Notes(store, secret, 0, self.nonces[0])
        self.notes.know(self.nonces)

    def _join(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        missing = list(range(1, self.job.nnodes))
        while missing and time.monotonic() < deadline:
            missing = [k for k in missing if not self.store.check([f"node/{k}"])]
            time.sleep(POLL_S)
        if missing:
            why = (
                f"node(s) {', '.join(map(str, missing))} of {self.job.nnodes} never joined within {timeout_s:g} s "
                f"({self.job.source}: every node must run the same `ddlbench sweep`; check that they reach "
                f"{self.job.master_addr}:{self.job.master_port})"
            )
            _put(self.store, "end", {"why": why})
            raise NodesFailed(why)

    def __call__(self, cell: CellSpec, cell_dir: Path, placement=None) -> Path:
        if self.lost:
            raise NodesFailed(self.lost)
        n, self.n = self.n, self.n + 1
        nodes, where = rank_nodes(cell, self.job.nnodes, self.job.nproc_per_node)
        port = free_port(self.addr)
        value = {"cell": json.loads(cell.to_json()), "port": port, "nodes": nodes, "master": self.addr}
        self.store.set(f"cell/{n}", seal(self.secret, n, value, self.nonces))
        cell_dir = cell_dir.resolve()
        mine = [r for r, k in enumerate(nodes) if k == 0]
        try:
            run_ranks(
                cell, cell_dir, mine, lambda r: rank_env(cell, r, nodes, self.addr, port), lambda: self._abort(n, nodes)
            )
            self._wait_others(n, cell, nodes)
        except CellFailed as e:
            if not self.store.check([f"fail/{n}"]):
                self.notes.put(f"fail/{n}", {"reason": e.reason})
            self._settle(n)  # a node that went away is the reason, and ends the sweep after this row
            self._note_refusals(n)
            if self.lost and self.lost not in e.reason:
                raise CellFailed(f"{self.lost}; {e.reason}", e.log_tail) from None
            raise
        result = cell_dir / "result.json"
        if not result.exists():
            raise CellFailed("rank 0 finished without writing result.json", log_tail(cell_dir))
        _note_placement(result, where, nodes)
        return result

    def _abort(self, n: int, nodes: list[int]) -> str | None:
        note = self.notes.get(f"fail/{n}")
        if note:
            return note["reason"]
        if self._check_lost():
            self.notes.put(f"fail/{n}", {"reason": self.lost})
            return self.lost
        return None

    def _note_refusals(self, n: int) -> None:
        """A node that refused cell n (harness/launchers/nodes/secret.py) has ended: like a lost node, it ends
        the sweep after this row, and is not waited for."""
        for k in range(1, self.job.nnodes):
            note = self.notes.get(f"done/{n}/{k}")
            if note and note.get("refused"):
                self.gone = sorted({*self.gone, k})
                self.lost = self.lost or note["reason"]

    def _check_lost(self) -> bool:
        """Whether a node's heartbeat has stopped (then `self.lost` says which, and how to go on)."""
        gone = self.heart.lost(range(self.job.nnodes))
        if gone:
            self.gone = sorted(set(self.gone) | set(gone))
            self.lost = (
                f"node(s) {', '.join(map(str, gone))} lost (no heartbeat for {LOST_S:g} s); every row "
                f"measured so far is kept: when the node is back, run the same command on every node "
                f"with --resume (--retry-failed measures the failed cell again)"
            )
        return bool(gone)

    def _settle(self, n: int) -> None:
        """After a failure: wait until every other node has reported cell n or is declared lost (a lost node
        shows first as a rank here losing its peer: the heartbeats are asked directly, fail/n is set)."""
        waiting = [k for k in range(1, self.job.nnodes) if not self.store.check([f"done/{n}/{k}"])]
        deadline = time.monotonic() + LOST_S + 2 * BEAT_S
        while waiting and not self._check_lost() and time.monotonic() < deadline:
            waiting = [k for k in waiting if not self.store.check([f"done/{n}/{k}"])]
            time.sleep(POLL_S)

    def _wait_others(self, n: int, cell: CellSpec, nodes: list[int]) -> None:
        deadline = time.monotonic() + cell.timeout_s + GRACE_S
        others = [k for k in range(1, self.job.nnodes)]
        while others:
            for k in list(others):
                out = self.notes.get(f"done/{n}/{k}")  # a stranger's is not read: still waiting
                if out is not None:
                    if not out["ok"]:
                        raise CellFailed(f"node {k}: {out['reason']}", out.get("log_tail", ""))
                    others.remove(k)
            why = self._abort(n, nodes)
            if why:
                raise CellFailed(why, "")
            if time.monotonic() > deadline:
                raise CellFailed(
                    f"node(s) {others} did not report within {cell.timeout_s + GRACE_S:g} s{self.notes.stranger()}", ""
                )
            time.sleep(POLL_S)

    def finish(self, why: str = "done") -> None:
        """Tell every agent the sweep is over and wait (briefly) until each has seen it: the store lives in
        this process, and an agent that finds it gone first would report node 0 lost. A node declared lost is
        not waited for (it cannot answer)."""
        if not self.store.check(["end"]):
            _put(self.store, "end", {"why": why})
        deadline = time.monotonic() + 5 * BEAT_S
        others = [f"bye/{k}" for k in range(1, self.job.nnodes) if k not in self.gone]
        while others and not self.store.check(others) and time.monotonic() < deadline:
            time.sleep(POLL_S)
        self.heart.stop()


def _note_placement(result: Path, where: str, nodes: list[int]) -> None:
    """The row's server placement and node count come from the result's `dist` block (summarize.py)."""
    data = json.loads(result.read_text())
    dist_block = data.setdefault("dist", {})
    dist_block["server_hosts"] = where
    dist_block["nodes"] = max(nodes[: data["cell"]["workers"]]) + 1
    write_json_atomic(result, data)
