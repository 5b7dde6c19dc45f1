"""The driver's side of warm ranks (docs/ARCHITECTURE.md, "Warm ranks"): `WarmPool` starts the zygote
(harness/warm/zygote.py) and asks it for ranks; each is a `WarmProc`, the part of `subprocess.Popen` the
launchers and the one supervisor (launch/watch.py) use: `pid`, `poll()`, `wait(timeout)`, `returncode`,
`kill()`, `terminate()`, `send_signal()`, `args`.

    with WarmPool() as pool:
        proc = pool.spawn("harness.worker", ["--cell", CELL_JSON, "--out", CELL_DIR], env, CELL_DIR / "rank0.log")
        ...  os.killpg(proc.pid, signal.SIGKILL) ends it and whatever it started (it leads its session)

A rank's exit status comes from the zygote, which reaps it (the driver is not its parent), through a
reader thread. When the zygote dies every rank it started dies too (parent-death signal) and every
WarmProc still running reports -9; `alive` turns False and `spawn` raises PoolDead: start a new pool.
The zygote runs behind the parent-death trampoline (launch/supervise.orphan_proof): it dies with the
driver, even by SIGKILL, and its ranks with it. A pool belongs to the thread that made it: the kernel
sends the parent-death signal when that thread ends (prctl(2)), so make it in the driver's main thread.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import harness
from harness.launch.supervise import kill_group, orphan_proof, python_argv

ZYGOTE_MODULE = "harness.warm.zygote"
READY_TIMEOUT_S = 120.0
"""How long the zygote may take to import everything and answer (a few seconds; a loaded box: more)."""
SPAWN_TIMEOUT_S = 60.0
"""How long a spawn may take to be answered (the zygote forks and waits for the child's set-up)."""
LOST = -signal.SIGKILL
"""returncode of a rank whose zygote died: the parent-death signal killed it."""
PACKAGE_ROOT = str(Path(harness.__file__).resolve().parents[1])
"""Where this driver's harness/ lives: the zygote imports exactly this code (first on its PYTHONPATH)."""
THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")


class PoolDead(RuntimeError):
    """The zygote is gone (killed, or failed to start): start a new WarmPool."""


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


class WarmProc:
    """One rank forked by the zygote: a drop-in for the subset of subprocess.Popen the launchers use."""

    def __init__(self, args: list[str]):
        self.args = args
        self.pid: int | None = None
        self.returncode: int | None = None
        self.requested_at = time.time()
        """Wall-clock time the spawn was asked for."""
        self.requested_monotonic = time.monotonic()
        """The same moment on the monotonic clock."""
        self.ended_at: float | None = None
        """time.monotonic() (the system's clock, the same in every process) when the zygote reaped it."""
        self.spawn_s: float | None = None
        """Seconds from the request to the zygote's answer (the child set up, its module starting)."""
        self._answered = threading.Event()
        self._ended = threading.Event()
        self._error = ""

    def poll(self) -> int | None:
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if not self._ended.wait(timeout):
            raise subprocess.TimeoutExpired(self.args, timeout)
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.returncode is None and self.pid is not None:
            try:
                os.kill(self.pid, sig)
            except ProcessLookupError:
                pass

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def _end(self, code: int) -> None:
        if self.returncode is None:
            self.returncode = code
        self._ended.set()

    def __repr__(self) -> str:
        return f"WarmProc(pid={self.pid}, returncode={self.returncode}, args={self.args!r})"


class WarmPool:
    """A zygote for this driver, and the ranks it forked."""

    def __init__(self, env: dict | None = None, preload: tuple[str, ...] = (),
                 ready_timeout_s: float = READY_TIMEOUT_S, log_path: str | Path | None = None, wait: bool = True):
        """Start the zygote; with `wait`, return once it is ready, else at once (it imports while the
        driver goes on; the first `spawn` waits for it)."""
        self._dir = tempfile.mkdtemp(prefix="ddlbench-warm-")
        self.socket_path = os.path.join(self._dir, "zygote.sock")
        self.log_path = Path(log_path) if log_path else Path(self._dir) / "zygote.log"
        self._lock = threading.Lock()
        self._next_id = 0
        self._waiting: dict[int, WarmProc] = {}  # request id -> proc not yet answered
        self._running: dict[int, WarmProc] = {}  # pid -> proc still running
        self._dead = ""
        self._closed = False
        argv = [*python_argv(), "-m", ZYGOTE_MODULE, "--socket", self.socket_path]
        for name in preload:
            argv += ["--preload", name]
        self._t0, self._ready_timeout_s, self._sock = time.monotonic(), ready_timeout_s, None
        with open(self.log_path, "w") as log:
            self.proc = subprocess.Popen(orphan_proof(argv), stdin=subprocess.DEVNULL, stdout=log,
                                         stderr=subprocess.STDOUT, env=zygote_env(env), start_new_session=True)
        self.pid = self.proc.pid
        if wait:
            self._handshake()

    def _handshake(self) -> None:
        """Wait for the zygote's hello (once); PoolDead when it does not come in time."""
        if self._sock is not None:
            return
        t0, ready_timeout_s = self._t0, self._ready_timeout_s
        try:
            self._sock = self._connect(t0 + ready_timeout_s, ready_timeout_s)
            self._rfile = self._sock.makefile("rb")
            try:
                hello = json.loads(self._rfile.readline() or b"null")
            except TimeoutError:
                hello = None
            if not hello or not hello.get("ready"):
                raise PoolDead(f"the zygote did not say it was ready within {ready_timeout_s:g} s{self._tail()}")
        except BaseException:
            self.close()
            raise
        self._sock.settimeout(None)
        self.ready_s = time.monotonic() - t0
        """Seconds from starting the zygote to its answer (its imports, mostly)."""
        self.preloaded: list[str] = hello["preloaded"]
        self.zygote_threads: list[str] = hello["threads"]
        """The zygote's threads when it was ready to fork (library pools; a fork copies only the caller)."""
        self._reader = threading.Thread(target=self._read, name="warm-pool-reader", daemon=True)
        self._reader.start()

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
        return not self._dead and not self._closed and self.proc.poll() is None

    def spawn(self, module: str, args: list[str], env: dict, log_path: str | Path, netns: str | None = None,
              cwd: str | Path | None = None) -> WarmProc:
        """Fork a rank running `module.main(args)` with exactly `env`, its output in `log_path` (truncated),
        inside the network namespace file `netns` if given, in `cwd` (default: this process's)."""
        proc = WarmProc([module, *args])
        req = {"op": "spawn", "module": module, "argv": [str(a) for a in args], "env": dict(env),
               "log": os.path.abspath(log_path), "netns": netns, "cwd": os.path.abspath(cwd or os.getcwd())}
        if self.alive:
            self._handshake()  # a pool started without waiting: its first spawn waits for the zygote
        with self._lock:
            if not self.alive:
                raise PoolDead(self._dead or "the warm pool is closed or its zygote has exited")
            self._next_id += 1
            req["id"] = self._next_id
            self._waiting[req["id"]] = proc
            try:
                self._sock.sendall((json.dumps(req) + "\n").encode())
            except OSError as e:
                self._waiting.pop(req["id"], None)
                raise PoolDead(f"the zygote is gone: {e}") from None
        if not proc._answered.wait(SPAWN_TIMEOUT_S):
            raise PoolDead(f"the zygote did not answer a spawn in {SPAWN_TIMEOUT_S:g} s")
        if proc._error:
            raise OSError(f"the zygote could not start {module}: {proc._error}")
        return proc

    def _read(self) -> None:
        """The reader thread: answers and exit statuses, until the zygote's socket closes."""
        try:
            for line in self._rfile:
                msg = json.loads(line)
                with self._lock:
                    if "id" in msg:
                        proc = self._waiting.pop(msg["id"], None)
                        if proc is None:
                            continue
                        proc.spawn_s = time.monotonic() - proc.requested_monotonic
                        if "pid" in msg:
                            proc.pid = msg["pid"]
                            self._running[proc.pid] = proc
                        proc._error = msg.get("error", "")
                        proc._answered.set()
                    elif "exit" in msg:
                        proc = self._running.pop(msg["pid"], None)
                        if proc is not None:
                            proc.ended_at = msg.get("at")
                            proc._end(msg["exit"])
        except (OSError, ValueError):
            pass
        self._lost("the zygote closed its socket (it exited or was killed)")

    def _lost(self, why: str) -> None:
        """Every rank still running is gone with the zygote (or is killed now): it reports LOST."""
        with self._lock:
            self._dead = self._dead or why
            running, self._running = list(self._running.values()), {}
            waiting, self._waiting = list(self._waiting.values()), {}
        for proc in running:
            kill_group(proc.pid)
            proc._end(LOST)
        for proc in waiting:
            proc._error = why
            proc._answered.set()

    def close(self) -> None:
        """Kill every rank and the zygote; idempotent."""
        if self._closed:
            return
        self._closed = True
        with self._lock:
            pids = list(self._running)
        for pid in pids:
            kill_group(pid)
        sock = getattr(self, "_sock", None)
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            kill_group(self.proc.pid)
            self.proc.wait(timeout=10)
        reader = getattr(self, "_reader", None)
        if reader is not None:
            reader.join(timeout=10)
        self._lost("the warm pool was closed")
        shutil.rmtree(self._dir, ignore_errors=True)

    def __enter__(self) -> "WarmPool":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
