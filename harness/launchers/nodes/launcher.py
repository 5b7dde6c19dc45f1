"""The multi-node launcher for clusters without Slurm (docs/ARCHITECTURE.md, "Launching"): `ddlbench sweep`
runs once on every node, as Kubeflow's PyTorchJob and Trainer, JobSet, SkyPilot and `torchrun --nnodes`
start a program (who is who: harness/launchers/nodes/env.py). The nodes meet in torch.distributed's c10d
TCPStore on node 0 (the rendezvous torchrun and Kubeflow already use), no protocol of our own beneath it.
Node 0 leads: it plans the cells, publishes each cell's ranks per node, runs its own ranks, waits for the
others' outcomes and writes the run directory through the ordinary `run_cells` (resumable, locked, one row
per cell). The other nodes are agents: they start the ranks a cell gives them, end them when the cell
fails anywhere, and report back; their logs stay in `<output>.node<K>/`.

Store keys (values JSON):
    node/K      node K joined: its host name, cores and nonce
    beat/K      a counter node K adds to every BEAT_S (liveness, both ways)
    cell/N      the sweep's N-th cell: spec, rendezvous port, the node of every rank; signed with the job
                secret behind a header line (harness/launchers/nodes/secret.py), checked before it is read
    fail/N      the first failure of cell N anywhere; every node then ends the cell's ranks
    done/N/K    node K's outcome of cell N: {"ok": bool, "reason", "log_tail"}, "refused" when it refused cell/N
    end         the sweep is over: {"why": "done" | reason}

Faults: a node that never joins ends the sweep after `join_timeout_s` with one line naming it (exit 1);
a node lost mid-sweep (no heartbeat for LOST_S) fails the running cell with that reason and stops the
sweep, every row measured so far kept (run it again with --resume when the node is back); the leader's
death ends every agent and its ranks within seconds (the store connection breaks; ranks also carry the
parent-death signal); a node that refuses a cell/N (bad or missing signature) runs nothing of it, exits 2
with one line, and ends the sweep after that row.
"""

from __future__ import annotations

import contextlib
import dataclasses
from pathlib import Path

import torch

from harness.contracts.cell import CellSpec
from harness.contracts.launcher import Follows, Launcher, LauncherEntry, LaunchRequest, register
from harness.core.errors import UserError
from harness.launchers.nodes.agent import run_agent
from harness.launchers.nodes.env import FLAG_NAMES, NodeJob, cell_nodes, node_job
from harness.launchers.nodes.leader import Leader, check_cell
from harness.launchers.nodes.meeting import open_store, store_address
from harness.launchers.nodes.secret import read_secret, warn_open
from harness.warm.spawn import warm_ranks

JOIN_TIMEOUT_S = 300.0
"""Seconds node 0 waits for every node to join, unless --join-timeout says otherwise."""


def _job(request: LaunchRequest) -> NodeJob | None:
    """The job this request runs in: the node-list flags, else the scheduler's variables; None outside one.
    Inside a Slurm allocation an outer scheduler's variables are not ours unless the flags say so."""
    flags = {k: v for k, v in request.flags.items() if k in FLAG_NAMES}
    if request.environ.get("SLURM_JOB_ID") and not any(v is not None for v in flags.values()):
        return None
    return node_job(request.environ, flags)


def _warn_if_open(job: NodeJob, secret: bytes | None) -> None:
    """Without a job secret, one warning naming the store's port, said as the store opens (a command refused
    before it runs a cell opens none and says nothing of it)."""
    if secret is None:
        ip = store_address(job.master_addr) if job.node_rank == 0 else None
        warn_open(job.node_rank, f"{job.master_addr}:{job.master_port}", f"{ip} only" if ip else "every address")


def _per_node(job: NodeJob, device: str) -> int:
    """Workers a node runs: the scheduler's count, or (auto) one per GPU, one per CPU node."""
    if job.nproc_per_node:
        return job.nproc_per_node
    gpus = torch.cuda.device_count() if torch.cuda.is_available() and device != "cpu" else 0
    return gpus or 1


class _Leading:
    """Node 0's part of the run: `session` opens the c10d store and waits for every node to join; inside it,
    `launch` runs each cell through the leader; at the end, whatever ended it, every agent is told (and ends
    its ranks)."""

    def __init__(self, job: NodeJob, join_timeout_s: float, secret: bytes | None):
        self.job, self.join_timeout_s, self.secret = job, join_timeout_s, secret
        self.leader: Leader | None = None

    @contextlib.contextmanager
    def session(self):
        _warn_if_open(self.job, self.secret)
        store = open_store(self.job, self.join_timeout_s)
        self.leader = Leader(store, self.job, self.join_timeout_s, self.secret)
        why = "done"
        try:
            yield
        except BaseException as e:  # every agent ends with the leader, whatever ended it
            why = str(e) or type(e).__name__
            raise
        finally:
            self.leader.finish(why)
            self.leader = None

    def launch(self, cell: CellSpec, cell_dir: Path, placement=None) -> Path:
        if self.leader is None:
            raise RuntimeError("the nodes launcher starts cells only inside its session (every node joined)")
        return self.leader(cell, cell_dir, placement)


def _checked(cell: CellSpec, job: NodeJob) -> CellSpec:
    check_cell(cell, job)
    return cell


def make(request: LaunchRequest) -> Launcher:
    job = _job(request)
    if job is None:
        raise UserError(
            "--launcher nodes needs a multi-node job: the node-list flags (--nnodes, --node-rank, "
            "--master-addr) or a scheduler's variables (Kubeflow PET_*, JobSet, SkyPilot)"
        )
    timeout = request.flags.get("join_timeout_s") or JOIN_TIMEOUT_S
    secret = read_secret(request.flags.get("secret_file"), request.environ)
    device = getattr(request.sweep, "device", "auto")
    job = dataclasses.replace(job, nproc_per_node=_per_node(job, device))
    if job.node_rank > 0:

        def serve(output: Path, cold: bool) -> int:
            _warn_if_open(job, secret)
            with warm_ranks(not cold):
                return run_agent(open_store(job, timeout), job, Path(f"{output}.node{job.node_rank}"), secret)

        raise Follows(serve)
    leading = _Leading(job, timeout, secret)
    return Launcher(
        "nodes",
        leading.launch,
        lambda w: cell_nodes(w, job.nnodes, job.nproc_per_node),
        lambda cell: _checked(cell, job),
        {"hosts": f"{job.nnodes} nodes ({job.source})"},
        hosts=job.nnodes,
        session=leading.session,
    )


register(
    LauncherEntry(
        "nodes",
        "ddlbench sweep on every node of a job without Slurm (Kubernetes, SkyPilot, a "
        "node list); chosen by the scheduler's variables or --nnodes",
        make=make,
        detect=lambda request: _job(request) is not None,
    )
)
