"""Nodes 1.. of a multi-node job without Slurm (harness/launchers/nodes/launcher.py has the protocol): start
the ranks each cell gives this node, end them when the cell fails anywhere, report back."""

from __future__ import annotations

import json
import os
import secrets
import socket
import time
from pathlib import Path

from harness.contracts.cell import CellSpec
from harness.core.errors import CellFailed
from harness.launchers.nodes.env import NodeJob
from harness.launchers.nodes.meeting import Heart, NodesFailed, Notes, _get, _put
from harness.launchers.nodes.ranks import POLL_S, rank_env, run_ranks
from harness.launchers.nodes.secret import CellRefused, open_sealed


def run_agent(store, job: NodeJob, scratch: Path, secret: bytes | None = None) -> int:
    """Nodes 1..: start the ranks each cell gives this node and report, until the leader says the end
    (exit status 0 when the sweep finished, 1 when it was ended); NodesFailed when node 0 is gone;
    CellRefused, nothing run, for a cell/N this node cannot trust (harness/launchers/nodes/secret.py)."""
    k = job.node_rank
    heart = None
    nonce = secrets.token_hex(16)
    notes = Notes(store, secret, k, nonce)
    try:
        _put(store, f"node/{k}", {"host": socket.gethostname(), "cores": os.cpu_count(), "nonce": nonce})
        heart = Heart(store, job)
        n = 0
        while True:
            while not store.check([f"cell/{n}"]):
                if store.check(["end"]):
                    why = _get(store, "end")["why"]
                    _put(store, f"bye/{k}", {})
                    return 0 if why == "done" else 1
                if heart.broken:
                    raise NodesFailed(f"node {k}: lost node 0 ({heart.broken}); this node's ranks were ended")
                time.sleep(POLL_S)
            _run_cell(notes, heart, k, n, scratch, _opened(notes, job, n, secret, nonce))
            n += 1
    except (RuntimeError, OSError) as e:  # the store's connection broke: node 0 is gone
        raise NodesFailed(
            f"node {k}: lost node 0 ({str(e).splitlines()[0][:160] if str(e) else type(e).__name__}); "
            f"this node's ranks were ended"
        ) from None
    finally:
        if heart is not None:
            heart.stop()


def _opened(notes: Notes, job: NodeJob, n: int, secret: bytes | None, nonce: str) -> dict:
    """cell/n, its signature checked before it is parsed; a refusal is reported to node 0 (which ends the
    sweep after this row) and raised."""
    k, store = job.node_rank, notes.store
    try:
        return open_sealed(secret, store.get(f"cell/{n}"), n, k, nonce, f"{job.master_addr}:{job.master_port}")
    except CellRefused as e:
        if not store.check([f"fail/{n}"]):
            notes.put(f"fail/{n}", {"reason": str(e)})
        notes.put(f"done/{n}/{k}", {"ok": False, "reason": str(e), "log_tail": "", "refused": True})
        raise


def _run_cell(notes: Notes, heart: Heart, k: int, n: int, scratch: Path, plan: dict) -> None:
    """Node k's part of cell n (`plan`, cell/n opened): its ranks, ended when the cell fails anywhere; its
    outcome in done/n/k."""
    cell = CellSpec.from_json(json.dumps(plan["cell"]))
    nodes = plan["nodes"]
    mine = [r for r, node in enumerate(nodes) if node == k]
    notes.know(plan.get("nonces", {}))  # node 0's and every node's, as node 0 signed them
    out = {"ok": True, "reason": "", "log_tail": ""}

    def abort() -> str | None:
        if heart.broken:
            raise NodesFailed(f"node {k}: lost node 0 ({heart.broken}); this node's ranks were ended")
        note = notes.get(f"fail/{n}")
        return note["reason"] if note else None

    try:
        run_ranks(
            cell, scratch / cell.cell_id, mine, lambda r: rank_env(cell, r, nodes, plan["master"], plan["port"]), abort
        )
    except CellFailed as e:
        out = {"ok": False, "reason": e.reason, "log_tail": e.log_tail}
        if not notes.store.check([f"fail/{n}"]):
            notes.put(f"fail/{n}", {"reason": f"node {k}: {e.reason}"})
    notes.put(f"done/{n}/{k}", out)
