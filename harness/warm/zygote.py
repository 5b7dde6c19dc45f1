"""The zygote: a fork server that has imported the ranks' libraries once (docs/ARCHITECTURE.md, "Warm
ranks").

    python -P -m harness.warm.zygote --socket PATH [--preload MODULE ...]   # started by client.WarmPool
    srun ... python -P -m harness.warm.zygote --tcp DIR                    # one per node: launchers/srun/warm.py

At start-up it imports PRELOAD (torch), PRELOAD_OPTIONAL (transformers and the model modules the workloads
import as they build, where installed) and the `--preload` modules its command line names: the rank entry
point `harness.rank.worker`, with the backends, schemes and workloads it imports (warm/client.zygote_argv).
Those are named by whoever starts the zygote, as `python -m` names a process's program, so this module
names no module above its layer (scripts/check_imports.py, RUN_TIME_LOADS); it runs nothing of theirs but
their module-level code. The module a request names is imported and run the same way, in the child. It never initialises
CUDA and runs no torch op: no OpenMP pool and no device context exist to be inherited by a fork.

Then it listens on the Unix socket PATH for its one client (the driver's WarmPool); or, with `--tcp`, on
a TCP port of every address of its node, announced in DIR/zygote.NODE.json, for the one client that first
sends the token it was given in DDLBENCH_ZYGOTE_TOKEN (connections without it are closed; the token
reaches it through Slurm's own authenticated launch, never the network). Requests and replies are JSON
lines:
    -> {"op": "spawn", "id": N, "module": M, "argv": [...], "env": {...}, "log": PATH, "netns": PATH|null,
        "cgroups": [PATH...], "cwd": PATH|null, "inherit": BOOL, "unset": [...]}
    <- {"id": N, "pid": PID}  or  {"id": N, "error": "why"}       (the child is set up, or could not be)
    <- {"pid": PID, "exit": CODE, "at": T}      (Popen.returncode: -SIGNAL when killed; T: time.monotonic() at reaping)
    -> {"op": "signal", "pid": PID, "sig": S, "group": BOOL}   (to a child; its process group with group)
A spawn's environment is exactly `env`, or with `inherit` the zygote's own as it started (what Slurm gave
the task on its node: SLURM_*, CUDA_VISIBLE_DEVICES) updated by `env`, less the `unset` names.
Each spawn forks a child that becomes a rank (harness/warm/child.py). The zygote's own work runs in one
thread (a fork copies only the calling one; the libraries' threads, e.g. pyarrow's jemalloc background
thread, handle a fork themselves, and numpy's BLAS pool is kept to one thread: client.zygote_env), reaps its children on
SIGCHLD, and when its client goes away (or on SIGTERM) kills every child's process group and exits. It runs behind the
parent-death trampoline (procs/trampoline.orphan_proof), so it dies with the driver, and its children die with it.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import selectors
import signal
import socket
import sys
import time

from harness.procs.kill import kill_group
from harness.warm.child import become_rank
from harness.warm.listen import TOKEN_VAR, accept_tcp, accept_unix

PRELOAD = ("torch",)
"""Imported once by every zygote, whatever it is told to pre-load besides (`--preload`)."""
PRELOAD_OPTIONAL = (
    "transformers",
    "transformers.models.bert.modeling_bert",
    "transformers.models.gpt2.modeling_gpt2",
    "torch.profiler",
    "torch.distributed.fsdp",
)
"""Imported when they can be: what the workloads (bert, gpt2), the tracer and the fsdp scheme import only as they
build a model or set up (the sweep and report commands never need them); without them a forked rank still spends
about a second importing them."""
CHILD_SETUP_S = 30.0
"""How long a forked child may take to set itself up (session, namespace, environment, log) before the
spawn is answered with an error."""
REAP_KILL_S = 5.0
"""On shutdown, how long the zygote waits for its killed children."""
ACCEPT_TIMEOUT_S = 600.0
"""With --tcp: how long the zygote waits for its client before it gives up and exits."""


def preload(extra: list[str]) -> list[str]:
    """Import PRELOAD, what it can of PRELOAD_OPTIONAL, and `extra` (by name, so no harness module is
    imported at module level here); return what was imported. Refuses to serve if that initialised
    CUDA: a forked child could not use it."""
    done = []
    for name in (*PRELOAD, *PRELOAD_OPTIONAL, *extra):
        try:
            importlib.import_module(name)
        except ImportError as e:
            if name not in PRELOAD_OPTIONAL:
                raise
            print(f"zygote: not pre-loaded: {name} ({e})", flush=True)
            continue
        done.append(name)
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        raise SystemExit("zygote: importing the ranks' modules initialised CUDA; a forked rank cannot use it")
    return done


def native_threads() -> list[str]:
    """The names of this process's threads (/proc/self/task): a fork copies only the calling one."""
    names = []
    for tid in sorted(os.listdir("/proc/self/task")):
        try:
            with open(f"/proc/self/task/{tid}/comm") as f:
                names.append(f.read().strip())
        except OSError:
            continue
    return names


class Zygote:
    """The serving loop over one client connection."""

    def __init__(self, conn: socket.socket, own_env: dict | None = None):
        self.conn = conn
        self.own_env = dict(os.environ if own_env is None else own_env)
        self.children: dict[int, int] = {}  # pid -> request id
        self.buf = b""
        self.wake_r, self.wake_w = os.pipe()
        os.set_blocking(self.wake_r, False)
        os.set_blocking(self.wake_w, False)
        signal.signal(signal.SIGCHLD, lambda *_: None)  # a Python handler, so that the wake-up fd is written
        signal.set_wakeup_fd(self.wake_w)
        self.sel = selectors.DefaultSelector()
        self.sel.register(conn, selectors.EVENT_READ)
        self.sel.register(self.wake_r, selectors.EVENT_READ)

    def send(self, msg: dict) -> None:
        self.conn.sendall((json.dumps(msg) + "\n").encode())

    def serve(self) -> None:
        """Until the client closes its end: answer requests, report exits."""
        while True:
            for key, _ in self.sel.select(timeout=1.0):
                if key.fileobj is self.conn:
                    data = self.conn.recv(1 << 16)
                    if not data:
                        return
                    self.buf += data
                    while b"\n" in self.buf:
                        line, self.buf = self.buf.split(b"\n", 1)
                        self.handle(json.loads(line))
                else:
                    while True:
                        try:
                            if not os.read(self.wake_r, 512):
                                break
                        except BlockingIOError:
                            break
            self.reap()

    def handle(self, req: dict) -> None:
        if req.get("op") == "signal":
            self.signal(req)
            return
        if req.get("op") != "spawn":
            self.send({"id": req.get("id"), "error": f"unknown op {req.get('op')!r}"})
            return
        if req.get("inherit"):
            unset = set(req.get("unset") or ())
            req = {**req, "env": {k: v for k, v in {**self.own_env, **req["env"]}.items() if k not in unset}}
        try:
            log_fd = os.open(req["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
        except OSError as e:
            self.send({"id": req["id"], "error": f"cannot open the log {req['log']}: {e}"})
            return
        pid, error = self.fork(req, log_fd)
        self.children[pid] = req["id"]
        self.send({"id": req["id"], "error": error} if error else {"id": req["id"], "pid": pid})

    def fork(self, req: dict, log_fd: int) -> tuple[int, str]:
        """Fork a child that becomes the rank; (its pid, "" or why its set-up failed)."""
        status_r, status_w = os.pipe()
        me = os.getpid()
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:  # the child: never returns
            os.close(status_r)
            become_rank(
                req,
                log_fd,
                status_w,
                zygote_pid=me,
                inherited=(self.conn.fileno(), self.wake_r, self.wake_w, self.sel.fileno()),
            )
        os.close(status_w)
        os.close(log_fd)
        error, deadline = b"", time.monotonic() + CHILD_SETUP_S
        with selectors.DefaultSelector() as sel:
            sel.register(status_r, selectors.EVENT_READ)
            while time.monotonic() < deadline:
                if not sel.select(timeout=max(0.0, deadline - time.monotonic())):
                    continue
                chunk = os.read(status_r, 4096)
                if not chunk:  # closed: set up, the module is running
                    break
                error += chunk
            else:
                error = b"the child did not finish setting itself up in time"
                kill_group(pid)
        os.close(status_r)
        return pid, error.decode(errors="replace")

    def signal(self, req: dict) -> None:
        """Signal one of its own children (never another process: the pid must be a child still running)."""
        pid = int(req.get("pid", 0))
        if pid not in self.children:
            return
        try:
            (os.killpg if req.get("group") else os.kill)(pid, int(req["sig"]))
        except (ProcessLookupError, PermissionError):
            if req.get("group"):
                kill_group(pid)  # between fork and setsid it leads no group yet

    def reap(self) -> None:
        while self.children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if self.children.pop(pid, None) is not None:
                self.send({"pid": pid, "exit": os.waitstatus_to_exitcode(status), "at": time.monotonic()})

    def kill_all(self) -> None:
        """SIGKILL every child's process group and reap them (bounded)."""
        for pid in list(self.children):
            kill_group(pid)
        deadline = time.monotonic() + REAP_KILL_S
        while self.children and time.monotonic() < deadline:
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid:
                self.children.pop(pid, None)
            else:
                time.sleep(0.01)


def client(a, token: str) -> socket.socket:
    """The one connection this zygote serves: on the Unix socket, or (--tcp) the one with the token."""
    if a.tcp:
        return accept_tcp(a.tcp, token, ACCEPT_TIMEOUT_S)
    return accept_unix(a.socket)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m harness.warm.zygote")
    where = ap.add_mutually_exclusive_group(required=True)
    where.add_argument("--socket", help="Unix socket path to serve on (one client)")
    where.add_argument(
        "--tcp", metavar="DIR", help=f"serve on a TCP port announced in DIR (one client, with the token in {TOKEN_VAR})"
    )
    ap.add_argument("--preload", action="append", default=[], help="another module to import up front")
    a = ap.parse_args(argv)
    token = os.environ.pop(TOKEN_VAR, "")
    if a.tcp and not token:
        raise SystemExit(f"zygote: --tcp needs the client's token in {TOKEN_VAR}")
    own_env = dict(os.environ)  # what a spawn with `inherit` starts from
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # through the finally below: children killed
    t0 = time.monotonic()
    loaded = preload(a.preload)
    import_s = time.monotonic() - t0
    threads = native_threads()
    print(f"zygote {os.getpid()}: imported {', '.join(loaded)} in {import_s:.2f} s; threads {threads}", flush=True)
    conn = client(a, token)
    zygote = Zygote(conn, own_env)
    try:
        zygote.send({"ready": True, "pid": os.getpid(), "preloaded": loaded, "import_s": import_s, "threads": threads})
        zygote.serve()
    except (BrokenPipeError, ConnectionResetError):
        pass
    finally:
        zygote.kill_all()
    print(f"zygote {os.getpid()}: client gone, children killed; exiting", flush=True)
    return 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    # Its children are reaped and it holds nothing to write: skip the interpreter's teardown of torch and
    # transformers (about 1 s), which every run's end would otherwise wait for (WarmPool.close).
    os._exit(code)
