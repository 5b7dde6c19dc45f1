"""The multi-node launcher for clusters without Slurm (docs/ARCHITECTURE.md, "Launching"): `ddlbench sweep`
runs once on every node, as Kubeflow's PyTorchJob and Trainer, JobSet, SkyPilot and `torchrun --nnodes`
start a program (who is who: harness/launch/nodes_env.py). The nodes meet in torch.distributed's c10d
TCPStore on node 0 (the rendezvous torchrun and Kubeflow already use), no protocol of our own beneath it.
Node 0 leads: it plans the cells, publishes each cell's ranks per node, runs its own ranks, waits for the
others' outcomes and writes the run directory through the ordinary `run_cells` (resumable, locked, one row
per cell). The other nodes are agents: they start the ranks a cell gives them, end them when the cell
fails anywhere, and report back; their logs stay in `<output>.node<K>/`.

Store keys (values JSON):
    node/K      node K joined: its host name and cores
    beat/K      a counter node K adds to every BEAT_S (liveness, both ways)
    cell/N      the sweep's N-th cell: spec, rendezvous port, the node of every rank
    fail/N      the first failure of cell N anywhere; every node then ends the cell's ranks
    done/N/K    node K's outcome of cell N: {"ok": bool, "reason", "log_tail"}
    end         the sweep is over: {"why": "done" | reason}

Faults: a node that never joins ends the sweep after `join_timeout_s` with one line naming it (exit 1);
a node lost mid-sweep (no heartbeat for LOST_S) fails the running cell with that reason and stops the
sweep, every row measured so far kept (run it again with --resume when the node is back); the leader's
death ends every agent and its ranks within seconds (the store connection breaks; ranks also carry the
parent-death signal).
"""

from __future__ import annotations

import datetime
import json
import os
import socket
import threading
import time
from pathlib import Path

import torch.distributed as dist

from harness.atomic import write_json_atomic
from harness.cell import CellSpec
from harness.errors import CellFailed, UserError
from harness.launch.base import LauncherEntry, register
from harness.launch.nodes_env import NodeJob, rank_nodes
from harness.launch.recipes import NodesRecipe, recipe
from harness.launch.nodes_ranks import POLL_S, rank_env, run_ranks
from harness.launch.supervise import free_port, log_tail

BEAT_S = 1.0
"""Seconds between heartbeats."""
LOST_S = float(os.environ.get("DDLBENCH_NODE_LOST_S", "15"))
"""A node whose heartbeat has not moved for this long is lost (the variable is for tests)."""
GRACE_S = 30.0
"""Beyond a cell's timeout, how long the leader waits for the other nodes' outcomes."""


class NodesFailed(Exception):
    """The job cannot go on (a node never joined, or was lost): one line for the user; exit status 1."""


def _put(store, key: str, value) -> None:
    store.set(key, json.dumps(value))


def _get(store, key: str):
    return json.loads(store.get(key).decode())


def open_store(job: NodeJob, timeout_s: float) -> dist.TCPStore:
    """Node 0 hosts the store; the others connect (retrying until node 0 listens or `timeout_s`)."""
    try:
        return dist.TCPStore(job.master_addr, job.master_port, is_master=job.node_rank == 0,
                             timeout=datetime.timedelta(seconds=timeout_s), wait_for_workers=False)
    except (RuntimeError, OSError, dist.DistStoreError) as e:
        who = "listen on" if job.node_rank == 0 else "reach node 0's store at"
        raise NodesFailed(f"node {job.node_rank} could not {who} {job.master_addr}:{job.master_port} within "
                          f"{timeout_s:g} s ({str(e).splitlines()[0][:160]}); check the master address and port "
                          f"({job.source}) and that node 0 is running `ddlbench sweep`") from None


class Heart:
    """Adds to beat/K every BEAT_S on a thread; `lost()` names the nodes whose beat stopped moving."""

    def __init__(self, store, job: NodeJob):
        self.store, self.job = store, job
        self.broken: str | None = None  # the store went away (the leader died)
        self._seen: dict[int, tuple[int, float]] = {}
        self._stop = threading.Event()
        threading.Thread(target=self._beat, name="node-heartbeat", daemon=True).start()

    def _beat(self) -> None:
        while not self._stop.is_set():
            try:
                self.store.add(f"beat/{self.job.node_rank}", 1)
            except Exception as e:  # the connection to node 0 broke
                self.broken = str(e).splitlines()[0] if str(e) else type(e).__name__
                return
            self._stop.wait(BEAT_S)

    def lost(self, nodes) -> list[int]:
        now = time.monotonic()
        out = []
        for k in nodes:
            if k == self.job.node_rank:
                continue
            count = self.store.add(f"beat/{k}", 0)
            last = self._seen.get(k)
            if last is None or last[0] != count:
                self._seen[k] = (count, now)
            elif now - last[1] > LOST_S:
                out.append(k)
        return out

    def stop(self) -> None:
        self._stop.set()


def check_cell(cell: CellSpec, job: NodeJob) -> None:
    """UserError before anything runs for a cell this launcher cannot place."""
    refusal = recipe(cell.backend, NodesRecipe).refuse
    if refusal:
        raise UserError(refusal)
    rank_nodes(cell, job.nnodes, job.nproc_per_node)


class Leader:
    """Node 0: the launcher `run_cells` calls for each cell, over the store (see the module docstring)."""

    def __init__(self, store, job: NodeJob, join_timeout_s: float):
        self.store, self.job = store, job
        self.n = 0
        self.lost: str | None = None
        self.addr = _address_towards(job.master_addr)
        _put(store, "node/0", {"host": socket.gethostname(), "cores": os.cpu_count()})
        self.heart = Heart(store, job)
        self._join(join_timeout_s)

    def _join(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        missing = list(range(1, self.job.nnodes))
        while missing and time.monotonic() < deadline:
            missing = [k for k in missing if not self.store.check([f"node/{k}"])]
            time.sleep(POLL_S)
        if missing:
            why = (f"node(s) {', '.join(map(str, missing))} of {self.job.nnodes} never joined within {timeout_s:g} s "
                   f"({self.job.source}: every node must run the same `ddlbench sweep`; check that they reach "
                   f"{self.job.master_addr}:{self.job.master_port})")
            _put(self.store, "end", {"why": why})
            raise NodesFailed(why)

    def __call__(self, cell: CellSpec, cell_dir: Path, placement=None) -> Path:
        if self.lost:
            raise NodesFailed(self.lost)
        n, self.n = self.n, self.n + 1
        nodes, where = rank_nodes(cell, self.job.nnodes, self.job.nproc_per_node)
        port = free_port(self.addr)
        _put(self.store, f"cell/{n}", {"cell": json.loads(cell.to_json()), "port": port, "nodes": nodes,
                                       "master": self.addr})
        cell_dir = cell_dir.resolve()
        mine = [r for r, k in enumerate(nodes) if k == 0]
        try:
            run_ranks(cell, cell_dir, mine, lambda r: rank_env(cell, r, nodes, self.addr, port),
                      lambda: self._abort(n, nodes))
            self._wait_others(n, cell, nodes)
        except CellFailed as e:
            if not self.store.check([f"fail/{n}"]):
                _put(self.store, f"fail/{n}", {"reason": e.reason})
            self._settle(n)  # a node that went away is the reason, and ends the sweep after this row
            if self.lost and self.lost not in e.reason:
                raise CellFailed(f"{self.lost}; {e.reason}", e.log_tail) from None
            raise
        result = cell_dir / "result.json"
        if not result.exists():
            raise CellFailed("rank 0 finished without writing result.json", log_tail(cell_dir))
        _note_placement(result, where, nodes)
        return result

    def _abort(self, n: int, nodes: list[int]) -> str | None:
        if self.store.check([f"fail/{n}"]):
            return _get(self.store, f"fail/{n}")["reason"]
        if self._check_lost():
            _put(self.store, f"fail/{n}", {"reason": self.lost})
            return self.lost
        return None

    def _check_lost(self) -> bool:
        """Whether a node's heartbeat has stopped (then `self.lost` says which, and how to go on)."""
        gone = self.heart.lost(range(self.job.nnodes))
        if gone:
            self.lost = (f"node(s) {', '.join(map(str, gone))} lost (no heartbeat for {LOST_S:g} s); every row "
                         f"measured so far is kept: when the node is back, run the same command on every node "
                         f"with --resume (--retry-failed measures the failed cell again)")
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
                if self.store.check([f"done/{n}/{k}"]):
                    out = _get(self.store, f"done/{n}/{k}")
                    if not out["ok"]:
                        raise CellFailed(f"node {k}: {out['reason']}", out.get("log_tail", ""))
                    others.remove(k)
            why = self._abort(n, nodes)
            if why:
                raise CellFailed(why, "")
            if time.monotonic() > deadline:
                raise CellFailed(f"node(s) {others} did not report within {cell.timeout_s + GRACE_S:g} s", "")
            time.sleep(POLL_S)

    def finish(self, why: str = "done") -> None:
        """Tell every agent the sweep is over and wait (briefly) until each has seen it: the store lives in
        this process, and an agent that finds it gone first would report node 0 lost."""
        if not self.store.check(["end"]):
            _put(self.store, "end", {"why": why})
        deadline = time.monotonic() + 5 * BEAT_S
        others = [f"bye/{k}" for k in range(1, self.job.nnodes)]
        while others and not self.store.check(others) and time.monotonic() < deadline:
            time.sleep(POLL_S)
        self.heart.stop()


def _note_placement(result: Path, where: str, nodes: list[int]) -> None:
    """The row's server placement and node count come from the result's `dist` block (summarize.py)."""
    data = json.loads(result.read_text())
    dist_block = data.setdefault("dist", {})
    dist_block["server_hosts"] = where
    dist_block["nodes"] = max(nodes[:data["cell"]["workers"]]) + 1
    write_json_atomic(result, data)


def _address_towards(host: str) -> str:
    """This node's address on its route to `host` (the rendezvous address the ranks are given)."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect((socket.gethostbyname(host), 9))
            return s.getsockname()[0]
    except OSError:
        return host


def run_agent(store, job: NodeJob, scratch: Path) -> int:
    """Nodes 1..: start the ranks each cell gives this node and report, until the leader says the end
    (exit status 0 when the sweep finished, 1 when it was ended); NodesFailed when node 0 is gone."""
    k = job.node_rank
    heart = None
    try:
        _put(store, f"node/{k}", {"host": socket.gethostname(), "cores": os.cpu_count()})
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
            _run_cell(store, heart, k, n, scratch)
            n += 1
    except (RuntimeError, OSError) as e:  # the store's connection broke: node 0 is gone
        raise NodesFailed(f"node {k}: lost node 0 ({str(e).splitlines()[0][:160] if str(e) else type(e).__name__}); "
                          f"this node's ranks were ended") from None
    finally:
        if heart is not None:
            heart.stop()


def _run_cell(store, heart: Heart, k: int, n: int, scratch: Path) -> None:
    """Node k's part of cell n: its ranks, ended when the cell fails anywhere; its outcome in done/n/k."""
    plan = _get(store, f"cell/{n}")
    cell = CellSpec.from_json(json.dumps(plan["cell"]))
    nodes = plan["nodes"]
    mine = [r for r, node in enumerate(nodes) if node == k]
    out = {"ok": True, "reason": "", "log_tail": ""}

    def abort() -> str | None:
        if heart.broken:
            raise NodesFailed(f"node {k}: lost node 0 ({heart.broken}); this node's ranks were ended")
        return _get(store, f"fail/{n}")["reason"] if store.check([f"fail/{n}"]) else None
    try:
        run_ranks(cell, scratch / cell.cell_id, mine,
                  lambda r: rank_env(cell, r, nodes, plan["master"], plan["port"]), abort)
    except CellFailed as e:
        out = {"ok": False, "reason": e.reason, "log_tail": e.log_tail}
        if not store.check([f"fail/{n}"]):
            _put(store, f"fail/{n}", {"reason": f"node {k}: {e.reason}"})
    _put(store, f"done/{n}/{k}", out)


register(LauncherEntry("nodes", "ddlbench sweep on every node of a job without Slurm (Kubernetes, SkyPilot, a "
                                "node list); chosen by the scheduler's variables or --nnodes"))
