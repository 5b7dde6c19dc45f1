"""One connection to a zygote (harness/warm/zygote.py) and the ranks it forked (docs/ARCHITECTURE.md,
"Warm ranks"). `ZygoteConnection` speaks the zygote's JSON-lines protocol over a connected socket: the Unix
socket of the driver's own zygote (client.WarmPool), or TCP to the zygote of one node of a Slurm
allocation (launchers/srun/warm.py). Each rank is a `WarmProc`, the part of `subprocess.Popen` the launchers
and the one supervisor (procs/supervisor.py) use: `pid`, `poll()`, `wait(timeout)`, `returncode`, `kill()`,
`terminate()`, `send_signal()`, `args`, plus `kill_group()`.

A rank's exit status comes from the zygote, which reaps it (the driver is not its parent), through a
reader thread. When the link is lost (the zygote died, or its node), every WarmProc still running reports
LOST and `spawn` raises PoolDead. A rank of a remote zygote is signalled through the zygote (its pid is
that node's), and its `ended_at` is when its exit reached this driver (another node's clock is not this
one's).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

from harness.procs.kill import kill_group
from harness.warm.child import ignored_signals

SPAWN_TIMEOUT_S = 60.0
"""How long a spawn may take to be answered (the zygote forks and waits for the child's set-up)."""
LOST = -signal.SIGKILL
"""returncode of a rank whose zygote died: the parent-death signal killed it."""


class PoolDead(RuntimeError):
    """The zygote is gone (killed, or failed to start): start a new one."""


class WarmProc:
    """One rank forked by a zygote: a drop-in for the subset of subprocess.Popen the launchers use."""

    def __init__(self, args: list[str], link: ZygoteConnection | None = None):
        self.args = args
        self.pid: int | None = None
        self.returncode: int | None = None
        self.requested_monotonic = time.monotonic()
        """When the spawn was asked for, on the monotonic clock."""
        self.ended_at: float | None = None
        """time.monotonic() of this host when the rank ended: the zygote's reaping time where the zygote runs
        on this host (the same clock in every process), else when its exit arrived here."""
        self.spawn_s: float | None = None
        """Seconds from the request to the zygote's answer (the child set up, its module starting)."""
        self._link = link
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
        if self.returncode is not None or self.pid is None:
            return
        if self._link is not None and self._link.remote:
            self._link.signal(self.pid, sig, group=False)
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, sig)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill_group(self) -> None:
        """SIGKILL its process group (it leads its session): it and whatever it started."""
        if self.returncode is not None or self.pid is None:
            return
        if self._link is not None and self._link.remote:
            self._link.signal(self.pid, signal.SIGKILL, group=True)
        else:
            kill_group(self.pid)

    def _end(self, code: int) -> None:
        if self.returncode is None:
            self.returncode = code
        self._ended.set()

    def __repr__(self) -> str:
        return f"WarmProc(pid={self.pid}, returncode={self.returncode}, args={self.args!r})"


class ZygoteConnection:
    """The protocol over one connected socket to a zygote."""

    def __init__(self, sock: socket.socket, remote: bool = False, describe=lambda: ""):
        """`sock` is connected; `remote`: the zygote runs on another host (signals go through it, exit
        times are taken here); `describe()` adds what is known of the zygote to errors (its log's tail)."""
        self.sock = sock
        self.remote = remote
        self._describe = describe
        self._lock = threading.Lock()
        self._next_id = 0
        self._waiting: dict[int, WarmProc] = {}  # request id -> proc not yet answered
        self._running: dict[int, WarmProc] = {}  # pid -> proc still running
        self._dead = ""
        self._rfile = sock.makefile("rb")
        self._reader: threading.Thread | None = None
        self.hello: dict = {}

    def handshake(self, timeout_s: float) -> dict:
        """Wait for the zygote's hello (it says so once its imports are done); PoolDead when it does not come."""
        self.sock.settimeout(timeout_s)
        try:
            hello = json.loads(self._rfile.readline() or b"null")
        except (TimeoutError, OSError, ValueError):
            hello = None
        if not hello or not hello.get("ready"):
            raise PoolDead(f"the zygote did not say it was ready within {timeout_s:g} s{self._describe()}")
        self.sock.settimeout(None)
        self.hello = hello
        self._reader = threading.Thread(target=self._read, name="warm-link-reader", daemon=True)
        self._reader.start()
        return hello

    @property
    def dead(self) -> str:
        """Why the link is lost, or "" while it serves."""
        return self._dead

    def _send(self, req: dict) -> None:
        self.sock.sendall((json.dumps(req) + "\n").encode())

    def spawn(
        self,
        module: str,
        args: list[str],
        env: dict,
        log_path: str | Path,
        netns: str | None = None,
        cwd: str | Path | None = None,
        inherit: bool = False,
        unset: tuple = (),
        cgroups: tuple[str, ...] = (),
    ) -> WarmProc:
        """Fork a rank running `module.main(args)` with exactly `env` (with `inherit`: the zygote's own
        environment updated by `env`, less `unset`), its output in `log_path` (truncated), inside the
        network namespace file `netns` if given, in the control groups whose procs files `cgroups` lists
        (procs/cgjoin.py), in `cwd` (default: this process's)."""
        proc = WarmProc([module, *args], self)
        req = {
            "op": "spawn",
            "module": module,
            "argv": [str(a) for a in args],
            "env": dict(env),
            "log": os.path.abspath(log_path),
            "netns": netns,
            "cgroups": list(cgroups),
            "cwd": os.path.abspath(cwd or os.getcwd()),
            "inherit": inherit,
            "unset": list(unset),
            "ignored": ignored_signals(),
        }
        with self._lock:
            if self._dead:
                raise PoolDead(self._dead)
            self._next_id += 1
            req["id"] = self._next_id
            self._waiting[req["id"]] = proc
            try:
                self._send(req)
            except OSError as e:
                self._waiting.pop(req["id"], None)
                raise PoolDead(f"the zygote is gone: {e}") from None
        if not proc._answered.wait(SPAWN_TIMEOUT_S):
            raise PoolDead(f"the zygote did not answer a spawn in {SPAWN_TIMEOUT_S:g} s")
        if proc._error:
            raise OSError(f"the zygote could not start {module}: {proc._error}")
        return proc

    def signal(self, pid: int, sig: int, group: bool) -> None:
        """Ask the zygote to signal its child `pid` (its process group with `group`)."""
        with self._lock:
            if self._dead:
                return
            with contextlib.suppress(OSError):
                self._send({"op": "signal", "pid": pid, "sig": int(sig), "group": group})

    def _read(self) -> None:
        """The reader thread: answers and exit statuses, until the zygote's socket closes."""
        try:
            for line in self._rfile:
                self._handle(json.loads(line))
        except (OSError, ValueError):
            pass
        self.lost("the zygote closed its socket (it exited or was killed)")

    def _handle(self, msg: dict) -> None:
        with self._lock:
            if "id" in msg:
                proc = self._waiting.pop(msg["id"], None)
                if proc is None:
                    return
                proc.spawn_s = time.monotonic() - proc.requested_monotonic
                if "pid" in msg:
                    proc.pid = msg["pid"]
                    self._running[proc.pid] = proc
                proc._error = msg.get("error", "")
                proc._answered.set()
            elif "exit" in msg:
                proc = self._running.pop(msg["pid"], None)
                if proc is not None:
                    proc.ended_at = time.monotonic() if self.remote else msg.get("at")
                    proc._end(msg["exit"])

    def running(self) -> list[WarmProc]:
        with self._lock:
            return list(self._running.values())

    def lost(self, why: str) -> None:
        """Every rank still running is gone with the zygote (or is killed now, where it runs here): it
        reports LOST; a spawn waiting for its answer fails with `why`."""
        with self._lock:
            self._dead = self._dead or why
            running, self._running = list(self._running.values()), {}
            waiting, self._waiting = list(self._waiting.values()), {}
        for proc in running:
            if not self.remote:
                kill_group(proc.pid)
            proc._end(LOST)
        for proc in waiting:
            proc._error = why
            proc._answered.set()

    def close(self, why: str = "the warm pool was closed") -> None:
        """Close the socket (the zygote then kills every child and exits) and end the reader."""
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()
        if self._reader is not None:
            self._reader.join(timeout=10)
        self.lost(why)
