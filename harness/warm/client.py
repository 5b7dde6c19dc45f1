"""The driver's side of warm ranks on this box (docs/ARCHITECTURE.md, "Warm ranks"): `WarmPool` starts
the zygote (harness/warm/zygote.py) and asks it for ranks; each is a `WarmProc` (harness/warm/connection.py),
the part of `subprocess.Popen` the launchers and the one supervisor (procs/supervisor.py) use.

    with WarmPool() as pool:
        proc = pool.spawn("harness.rank.worker", ["--cell", CELL_JSON, "--out", CELL_DIR], env, CELL_DIR / "rank0.log")
        ...  os.killpg(proc.pid, signal.SIGKILL) ends it and whatever it started (it leads its session)

The protocol and the WarmProc are harness/warm/connection.py's (the srun launcher speaks it to a zygote per
node). When the zygote dies every rank it started dies too (parent-death signal) and every WarmProc still
running reports -9; `alive` turns False and `spawn` raises PoolDead: start a new pool.
The zygote runs behind the parent-death trampoline (procs/trampoline.orphan_proof): it dies with the
driver, even by SIGKILL, and its ranks with it. A pool belongs to the thread that made it: the kernel
sends the parent-death signal when that thread ends (prctl(2)), so make it in the driver's main thread.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from harness.procs.argv import PACKAGE_ROOT, WORKER_MODULE, python_argv
from harness.procs.kill import kill_group
from harness.procs.trampoline import orphan_proof
from harness.warm.connection import LOST, PoolDead, WarmProc, ZygoteConnection

__all__ = ["LOST", "PoolDead", "WarmPool", "WarmProc", "zygote_argv", "zygote_env"]

ZYGOTE_MODULE = "harness.warm.zygote"
READY_TIMEOUT_S = 120.0
"""How long the zygote may take to import everything and answer (a few seconds; a loaded box: more)."""
THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")


def zygote_argv(*where: str) -> list[str]:
    """The command that starts a zygote serving `where` (`--socket PATH` or `--tcp DIR`), told to pre-load
    the rank entry point (WORKER_MODULE, with the backends, schemes and workloads it imports): named on
    the zygote's command line, as `python -m` names a process's program, so the zygote names no module
    above its layer."""
    return [*python_argv(), "-m", ZYGOTE_MODULE, *where, "--preload", WORKER_MODULE]


def zygote_env(env: dict | None = None) -> dict:
    """The zygote's environment: `env` (default this process's) with this harness first on PYTHONPATH,
    without the thread counts (what torch and OpenMP read at import must be a fresh process's defaults;
    each rank's own are applied after the fork, harness/warm/child.py), and numpy's BLAS pool
    single-threaded (so that no idle BLAS threads exist when it forks)."""
    out = {k: v for k, v in (os.environ if env is None else env).items() if k not in THREAD_VARS}
    out["PYTHONPATH"] = os.pathsep.join([PACKAGE_ROOT, *filter(None, [out.get("PYTHONPATH")])])
    out.update(PYTHONUNBUFFERED="1", PYTHONSAFEPATH="1")
    out.setdefault("OPENBLAS_NUM_THREADS", "1")
    return out


DIR_PREFIX = "ddlbench-warm-"
"""The pool's folder in the temporary directory: DIR_PREFIX + the driver's pid + "-" + a random part."""


def remove_stale_dirs(root: str | None = None) -> list[str]:
    """Remove the folders of pools whose driver has gone (killed by SIGKILL, its zygote with it: nothing was
    left to remove them); a folder whose driver's pid is alive, or names none, is left. Returns those removed."""
    root = root or tempfile.gettempdir()
    removed = []
    try:
        names = [n for n in os.listdir(root) if n.startswith(DIR_PREFIX)]
    except OSError:
        return removed
    for name in names:
        pid = name[len(DIR_PREFIX) :].split("-", 1)[0]
        if not pid.isdigit() or os.path.exists(f"/proc/{pid}"):  # this driver's own included
            continue
        shutil.rmtree(os.path.join(root, name), ignore_errors=True)
        removed.append(name)
    return removed


class WarmPool:
    """A zygote for this driver, and the ranks it forked."""

    def __init__(
        self,
        env: dict | None = None,
        preload: tuple[str, ...] = (),
        ready_timeout_s: float = READY_TIMEOUT_S,
        log_path: str | Path | None = None,
        wait: bool = True,
    ):
        """Start the zygote; with `wait`, return once it is ready, else at once (it imports while the
        driver goes on; the first `spawn` waits for it)."""
        remove_stale_dirs()
        self._dir = tempfile.mkdtemp(prefix=f"{DIR_PREFIX}{os.getpid()}-")
        self.socket_path = os.path.join(self._dir, "zygote.sock")
        self.log_path = Path(log_path) if log_path else Path(self._dir) / "zygote.log"
        self._closed = False
        self.link: ZygoteConnection | None = None
        argv = zygote_argv("--socket", self.socket_path)
        for name in preload:
            argv += ["--preload", name]
        self._t0, self._ready_timeout_s = time.monotonic(), ready_timeout_s
        with open(self.log_path, "w") as log:
            self.proc = subprocess.Popen(
                orphan_proof(argv),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=zygote_env(env),
                start_new_session=True,
            )
        self.pid = self.proc.pid
        if wait:
            self._handshake()

    def _handshake(self) -> None:
        """Connect and wait for the zygote's hello (once); PoolDead when it does not come in time."""
        if self.link is not None:
            return
        deadline = self._t0 + self._ready_timeout_s
        sock = None
        try:
            sock = self._connect(deadline, self._ready_timeout_s)
            link = ZygoteConnection(sock, describe=self._tail)
            hello = link.handshake(max(0.1, deadline - time.monotonic()))
        except BaseException:
            if sock is not None:
                sock.close()
            self.close()
            raise
        self.link = link
        self.ready_s = time.monotonic() - self._t0
        """Seconds from starting the zygote to its answer (its imports, mostly)."""
        self.preloaded: list[str] = hello["preloaded"]
        self.zygote_threads: list[str] = hello["threads"]
        """The zygote's threads when it was ready to fork (library pools; a fork copies only the caller)."""

    def _tail(self) -> str:
        try:
            text = self.log_path.read_text(errors="replace").strip().splitlines()[-20:]
        except OSError:
            return ""
        return (": " + "\n".join(text)) if text else ""

    def _connect(self, deadline: float, timeout_s: float) -> socket.socket:
        while True:
            code = self.proc.poll()
            if code is not None:
                raise PoolDead(f"the zygote exited with status {code} before it was ready{self._tail()}")
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                sock.settimeout(max(0.1, deadline - time.monotonic()))
                sock.connect(self.socket_path)
                return sock
            except (FileNotFoundError, ConnectionRefusedError):
                sock.close()
            if time.monotonic() > deadline:
                raise PoolDead(f"the zygote was not ready after {timeout_s:g} s{self._tail()}")
            time.sleep(0.05)

    @property
    def alive(self) -> bool:
        """Whether the zygote still serves (False once it died or the pool was closed)."""
        return not self._closed and self.proc.poll() is None and not (self.link and self.link.dead)

    def spawn(
        self,
        module: str,
        args: list[str],
        env: dict,
        log_path: str | Path,
        netns: str | None = None,
        cwd: str | Path | None = None,
        cgroups: tuple[str, ...] = (),
    ) -> WarmProc:
        """Fork a rank running `module.main(args)` with exactly `env`, its output in `log_path` (truncated),
        inside the network namespace file `netns` if given, in the control groups whose procs files `cgroups`
        lists (procs/cgjoin.py), in `cwd` (default: this process's)."""
        if self.alive:
            self._handshake()  # a pool started without waiting: its first spawn waits for the zygote
        if not self.alive or self.link is None:
            raise PoolDead((self.link.dead if self.link else "") or "the warm pool is closed or its zygote has exited")
        return self.link.spawn(module, args, env, log_path, netns=netns, cwd=cwd, cgroups=cgroups)

    def close(self) -> None:
        """Kill every rank and the zygote; idempotent."""
        if self._closed:
            return
        self._closed = True
        for proc in self.link.running() if self.link else []:
            kill_group(proc.pid)
        if self.link is not None:
            self.link.close()
        else:  # never connected (still importing, or waiting for its client): it forked nothing, and it would
            kill_group(self.proc.pid)  # notice no closed socket; waiting for it would take the 10 s below
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            kill_group(self.proc.pid)
            self.proc.wait(timeout=10)
        shutil.rmtree(self._dir, ignore_errors=True)

    def __enter__(self) -> WarmPool:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
