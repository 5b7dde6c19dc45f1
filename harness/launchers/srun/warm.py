"""Warm ranks inside a Slurm allocation (docs/ARCHITECTURE.md, "Warm ranks"): one long job step runs a
zygote (harness/warm/zygote.py) on every node of the allocation, and each cell's ranks are forked by the
zygotes of their nodes instead of starting a job step per cell.

    srun --job-name=ddlbench-zygotes --nodes=N --ntasks=N --ntasks-per-node=1 --overlap ... \\
        python -P -m harness.warm.zygote --tcp RUN/zygotes          # once per run, at its first warm cell

The cell is planned exactly as a cold one (its backend's `SrunRecipe.plan`); launchers/srun/tasks.py reads
each planned step back into its tasks, and a task becomes a spawn on its node's zygote with the variables
srun would have given it on top of what Slurm gave the zygote on that node (SLURMD_NODENAME,
CUDA_VISIBLE_DEVICES, the job's SLURM_JOB_*). A cell whose steps are not all plain tasks of the worker
(a framework's own launch program: horovodrun) runs cold, as a step of its own.

The zygote step asks for every CPU of a node (`--cpus-per-task`, the smallest node's count) with
`--overlap` (Slurm 22.05: it shares CPUs, memory and GPUs with every other step), so cold steps of the
same run still start; its ranks share their node's CPUs instead of each being bound to its own. The
driver reaches each zygote at Slurm's address for the node (NodeAddr) on the port the zygote announces in
the run's shared directory, and proves itself with a token given through Slurm's own launch. When the
driver ends (however: SIGKILL closes its sockets), every zygote kills its ranks and exits, and the step
ends with it.
"""

from __future__ import annotations

import contextlib
import json
import secrets
import socket
import subprocess
import sys
import time
from pathlib import Path

from harness.contracts.recipes.srun import Allocation
from harness.core.errors import CellFailed
from harness.launchers.srun.env import node_addr
from harness.launchers.srun.tasks import Task, task_env
from harness.procs.crash import with_rank_error
from harness.procs.logs import log_tail
from harness.procs.supervisor import Ended, Proc, how, watch
from harness.warm.client import zygote_argv
from harness.warm.connection import PoolDead, WarmProc, ZygoteConnection
from harness.warm.listen import TOKEN_VAR

READY_TIMEOUT_S = 180.0
"""How long the zygotes' step may take to start and import everything on every node."""
_THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


class NodeZygotes:
    """The run's zygote step and a link to each node's zygote, started at the first warm cell."""

    def __init__(self, alloc: Allocation, folder: Path, environ: dict):
        """`folder`: a directory every node sees (the run's); `environ`: the step's environment (the
        driver's, cleaned of stale rank variables by the srun launcher)."""
        self.alloc = alloc
        self.folder = folder
        self.environ = environ
        self.links: dict[str, ZygoteConnection] = {}
        self.proc: subprocess.Popen | None = None
        self.started = 0
        """Zygote steps started (the first, and one after each that was lost)."""
        self.failed = ""
        """Why the zygotes could not be started ("" while they can)."""

    def argv(self) -> list[str]:
        n, cpus = len(self.alloc.nodes), min(self.alloc.cpus_per_node or (1,))
        return [
            "srun",
            f"--job-name=ddlbench-zygotes-{self.folder.parent.name}",
            f"--nodes={n}",
            f"--ntasks={n}",
            "--ntasks-per-node=1",
            f"--cpus-per-task={max(1, cpus)}",
            "--overlap",
            "--input=none",
            "--kill-on-bad-exit=0",
            f"--output={self.folder}/zygote.%N.log",
            *zygote_argv("--tcp", str(self.folder)),
        ]

    def usable(self) -> bool:
        """Whether the zygotes serve, (re)starting their step when it is not up or a link was lost. When
        they cannot be started (no filesystem shared with the nodes, a step refused), the run goes on cold:
        said once on stderr, and False from then on."""
        if self.failed:
            return False
        if self.proc is None or self.proc.poll() is not None or any(lk.dead for lk in self.links.values()):
            self.close()
            try:
                self._start()
            except (PoolDead, OSError) as e:
                self.failed = str(e)
                print(
                    f"warning: warm ranks are unavailable in allocation {self.alloc.job_id}, so every cell "
                    f"starts its ranks as job steps (cold): {self.failed}",
                    file=sys.stderr,
                    flush=True,
                )
                return False
        return True

    def link(self, node: str) -> ZygoteConnection:
        """The link to `node`'s zygote (`usable()` first)."""
        if node not in self.links:
            raise PoolDead(f"node {node} is not in allocation {self.alloc.job_id} ({', '.join(self.alloc.nodes)})")
        return self.links[node]

    def _start(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        for old in self.folder.glob("zygote.*.json"):
            old.unlink()
        token = secrets.token_hex(32)
        env = {k: v for k, v in self.environ.items() if k not in _THREAD_VARS}
        env.update({TOKEN_VAR: token, "PYTHONUNBUFFERED": "1", "PYTHONSAFEPATH": "1", "OPENBLAS_NUM_THREADS": "1"})
        with open(self.folder / "srun.log", "a") as log:
            self.proc = subprocess.Popen(
                self.argv(), stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
            )
        self.started += 1
        deadline = time.monotonic() + READY_TIMEOUT_S
        try:
            for node in self.alloc.nodes:
                self.links[node] = self._connect(node, token, deadline)
        except BaseException:
            self.close()
            raise

    def _connect(self, node: str, token: str, deadline: float) -> ZygoteConnection:
        """Wait for `node`'s announcement, connect, prove, and wait for its hello."""
        path = self.folder / f"zygote.{node}.json"
        while not path.exists():
            if self.proc.poll() is not None:
                raise PoolDead(
                    f"the zygote step ended (status {self.proc.returncode}) before node {node}'s "
                    f"zygote was up{self._tail()}"
                )
            if time.monotonic() > deadline:
                raise PoolDead(f"node {node}'s zygote did not start within {READY_TIMEOUT_S:g} s{self._tail()}")
            time.sleep(0.05)
        port = json.loads(path.read_text())["port"]
        sock = socket.create_connection((node_addr(node), port), timeout=max(1.0, deadline - time.monotonic()))
        sock.sendall(token.encode() + b"\n")
        link = ZygoteConnection(sock, remote=True, describe=self._tail)
        link.handshake(max(1.0, deadline - time.monotonic()))
        return link

    def _tail(self) -> str:
        lines = []
        for f in [self.folder / "srun.log", *sorted(self.folder.glob("zygote.*.log"))]:
            if f.exists():
                lines += [f"{f.name}: {ln}" for ln in f.read_text(errors="replace").splitlines()[-5:]]
        return (": " + "\n".join(lines)) if lines else ""

    def spawn(self, task: Task) -> WarmProc:
        env = task_env(task, self.alloc)
        unset = ("SLURM_TASK_PID", *(v for v in ("OPENBLAS_NUM_THREADS",) if v not in self.environ))
        return self.link(task.host).spawn(task.module, list(task.args), env, task.log, inherit=True, unset=unset)

    def close(self) -> None:
        """Close every link (each zygote kills its ranks and exits), then end the step."""
        for link in self.links.values():
            link.close("the run's zygote step was closed")
        self.links = {}
        if self.proc is not None and self.proc.poll() is None:
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.terminate()
                try:
                    self.proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
        self.proc = None


def run_tasks(zygotes: NodeZygotes, tasks: list[Task], timeout_s: float, cell_dir: Path) -> None:
    """Fork every task on its node and hand them to the one supervisor (procs/supervisor.py); CellFailed when
    the cell fails. Every rank started here is killed when this returns or raises."""
    procs: list[tuple[Task, WarmProc]] = []
    try:
        for task in tasks:
            procs.append((task, zygotes.spawn(task)))
        watch(
            [Proc(p, _name(t), Path(t.log).name, _died(t, cell_dir), main=t.step.main) for t, p in procs],
            timeout_s,
            cell_dir,
            lambda running: Ended(
                f"timed out after {timeout_s:g} s with {', '.join(q.name for q in running)} still running", None
            ),
        )
    except Ended as e:
        _kill([p for _, p in procs])
        raise CellFailed(e.reason, log_tail(cell_dir, first=e.rank or 0)) from None
    except (PoolDead, OSError) as e:
        _kill([p for _, p in procs])
        raise CellFailed(f"a node's zygote could not start the ranks: {e}", log_tail(cell_dir)) from None
    finally:
        _kill([p for _, p in procs])


def _name(task: Task) -> str:
    return f"{'rank' if task.step.role == 'workers' else task.step.role.rstrip('s')} {task.rank}"


def _died(task: Task, cell_dir: Path):
    rank = task.rank if task.step.main else None
    return lambda code: Ended(with_rank_error(f"{_name(task)} died ({how(code)})", cell_dir, rank), rank)


def _kill(procs: list[WarmProc]) -> None:
    """SIGKILL every rank's process group through its zygote and wait for the exits (bounded)."""
    for p in procs:
        p.kill_group()
    deadline = time.monotonic() + 10
    for p in procs:
        with contextlib.suppress(subprocess.TimeoutExpired):
            p.wait(timeout=max(0.0, deadline - time.monotonic()))
