"""A forked child of the zygote becoming a rank (docs/ARCHITECTURE.md, "Warm ranks").

Everything a fresh `python -P -m MODULE ARGV` rank would get from its launcher and its interpreter's
start-up, made again after the fork: its own session (the launcher kills it by process group), the
parent-death signal (it dies with the zygote, as a local rank dies with the driver), the network namespace
it was placed in (as `nsenter --net`) and its host's control groups (procs/cgjoin.py), exactly the
environment it was given (the C library's too: CUDA, NCCL and gloo read it later), the working directory,
its log on fd 1 and 2 (unbuffered, as PYTHONUNBUFFERED would), a fresh interpreter's signal dispositions,
and torch's intra-op thread count from the environment (torch and its OpenMP runtime read OMP_NUM_THREADS
when the zygote imported them, not now). Then it runs MODULE.main(ARGV) and leaves with os._exit (as
harness.contracts.training.exit_now does).

Set-up errors go back to the zygote through `status_w` (the spawn fails with them); once the module
runs, what it prints goes to its log.
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib
import io
import os
import signal
import sys
import traceback

try:  # an ordinary dependency (pyproject.toml), but a rank runs without it: see show_title
    import setproctitle
except ImportError:
    setproctitle = None
else:  # it finds the memory it may write the title into from the C environment, which a child replaces:
    setproctitle.getproctitle()  # look now, in the zygote, while the environment is the one exec gave

LIBC = ctypes.CDLL(None, use_errno=True)
PR_SET_PDEATHSIG = 1  # prctl(2)
CLONE_NEWNET = 0x40000000  # setns(2): Python 3.11 has no os.setns
ORPHANED = 70
"""Exit status of a child whose zygote died before it could ask to die with it (as the trampoline's)."""
SETUP_FAILED = 71
"""Exit status of a child that could not set itself up (the spawn's error says why)."""
THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")
"""Where torch takes its default intra-op thread count from, in this order."""
IMPORT_VARS = ("DDLBENCH_SCHEME_MODULES",)
"""Variables naming modules a rank imports as it starts (harness/schemes/__init__.py reads this one at
import time, which in the zygote happened with the zygote's environment): imported here when missing."""


def become_rank(req: dict, log_fd: int, status_w: int, zygote_pid: int, inherited: tuple[int, ...]) -> None:
    """Set up, tell the zygote (closing `status_w`), run the module; never returns."""
    try:
        setup(req, log_fd, zygote_pid, inherited)
    except BaseException as e:  # whatever it was, the spawn fails with it
        try:
            os.write(status_w, f"{type(e).__name__}: {e}".encode())
        finally:
            os._exit(SETUP_FAILED)
    os.close(status_w)
    os._exit(run(req["module"], list(req["argv"])))


def setup(req: dict, log_fd: int, zygote_pid: int, inherited: tuple[int, ...]) -> None:
    os.setsid()
    if LIBC.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG)")
    if os.getppid() != zygote_pid:  # the zygote died before the prctl: nobody would kill this process
        os._exit(ORPHANED)
    default_signals(req.get("ignored", ()))
    for fd in inherited:  # the zygote's socket, wake-up pipe and selector
        with contextlib.suppress(OSError):
            os.close(fd)
    if req.get("netns"):
        enter_netns(req["netns"])
    for procs in req.get("cgroups") or ():  # the emulated host's CPU share (procs/cgjoin.py), before it runs
        with open(procs, "w") as f:
            f.write(f"{os.getpid()}\n")
    old_path = os.environ.get("PYTHONPATH", "")
    os.environ.clear()  # through putenv/unsetenv: the C library's environment follows
    os.environ.update(req["env"])
    sync_sys_path(old_path, os.environ.get("PYTHONPATH", ""))
    if req.get("cwd"):
        os.chdir(req["cwd"])
    redirect(log_fd)
    set_threads(os.environ)


def ignored_signals() -> list[int]:
    """The signals this process ignores, which a process it starts through exec would inherit as ignored
    (signal(7): ignored stays ignored across execve; handled ones reset to default). SIGPIPE and SIGXFSZ
    are left out: subprocess resets them and every Python ignores them anyway. Asked by the spawner
    (harness/warm/connection.py), so a forked rank starts as a cold one would (`nohup cmd &` ignores SIGINT)."""
    out = []
    for sig in signal.valid_signals():
        if sig in (signal.SIGKILL, signal.SIGSTOP, signal.SIGPIPE, signal.SIGXFSZ):
            continue
        try:
            if signal.getsignal(sig) == signal.SIG_IGN:
                out.append(int(sig))
        except (OSError, ValueError):
            pass
    return out


def default_signals(ignored=()) -> None:
    """A fresh interpreter's dispositions, as the spawner's exec would leave them: `ignored` (the spawner's
    ignored signals) stay ignored, everything else default but SIGINT (KeyboardInterrupt, unless ignored)
    and SIGPIPE, SIGXFSZ (ignored); no wake-up fd, nothing blocked."""
    signal.set_wakeup_fd(-1)
    for sig in signal.valid_signals():
        if sig in (signal.SIGKILL, signal.SIGSTOP):
            continue
        with contextlib.suppress(OSError, RuntimeError, ValueError):
            signal.signal(sig, signal.SIG_DFL)
    for sig in ignored:
        with contextlib.suppress(OSError, RuntimeError, ValueError):
            signal.signal(sig, signal.SIG_IGN)
    if signal.SIGINT not in ignored:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_SETMASK, set())


def enter_netns(path: str) -> None:
    """Join the network namespace at `path` (/var/run/netns/NAME, /proc/PID/ns/net), as `nsenter --net`."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        if LIBC.setns(fd, CLONE_NEWNET) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"setns({path}, CLONE_NEWNET): {os.strerror(err)}")
    finally:
        os.close(fd)


def sync_sys_path(old: str, new: str) -> None:
    """sys.path as the child's PYTHONPATH would have made it: the zygote's PYTHONPATH entries replaced by
    the child's (a fresh `python -P` puts PYTHONPATH first), the rest (the standard library, site) kept."""
    old_entries = [p for p in old.split(os.pathsep) if p]
    new_entries = [p for p in new.split(os.pathsep) if p]
    sys.path[:] = new_entries + [p for p in sys.path if p not in old_entries and p not in new_entries]
    importlib.invalidate_caches()


def redirect(log_fd: int) -> None:
    """stdin from /dev/null, stdout and stderr to the log, unbuffered."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(log_fd, 1)
    os.dup2(log_fd, 2)
    os.close(log_fd)
    encoding = sys.__stdout__.encoding if sys.__stdout__ else "utf-8"
    sys.stdout = sys.__stdout__ = io.TextIOWrapper(
        io.FileIO(1, "w", closefd=False), encoding=encoding, line_buffering=True, write_through=True
    )
    sys.stderr = sys.__stderr__ = io.TextIOWrapper(
        io.FileIO(2, "w", closefd=False),
        encoding=encoding,
        errors="backslashreplace",
        line_buffering=True,
        write_through=True,
    )


def set_threads(environ) -> None:
    """torch's intra-op threads from THREAD_VARS, as torch would have read them at import (the inter-op
    pool's size does not depend on them: the hardware's concurrency, in the zygote as in a fresh rank)."""
    torch = sys.modules.get("torch")
    if torch is None:
        return
    for var in THREAD_VARS:
        try:
            n = int(environ.get(var, ""))
        except ValueError:
            continue
        if n > 0:
            torch.set_num_threads(n)
            return


def show_title(module: str, argv: list[str]) -> None:
    """Show the command line a cold rank has (`python -P -m MODULE ARGV`) in ps, top and /proc/PID/cmdline,
    instead of the zygote's: users and tools find ranks by it. Where setproctitle is missing (a machine
    set up without it) the rank keeps the zygote's title."""
    if setproctitle is not None:
        setproctitle.setproctitle(" ".join([sys.executable, "-P", "-m", module, *argv]))


def run(module: str, argv: list[str]) -> int:
    """MODULE.main(argv)'s exit status (SystemExit's code; 1 and the traceback in the log on an exception)."""
    try:
        for var in IMPORT_VARS:
            for name in filter(None, (x.strip() for x in os.environ.get(var, "").split(","))):
                if name not in sys.modules:
                    importlib.import_module(name)
        mod = importlib.import_module(module)
        sys.argv = [getattr(mod, "__file__", None) or module, *argv]
        show_title(module, argv)
        code = mod.main(argv)
    except SystemExit as e:
        code = e.code
    except BaseException:  # as an uncaught exception in a fresh interpreter
        traceback.print_exc()
        code = 1
    if code is not None and not isinstance(code, int):
        print(code, file=sys.stderr)
        code = 1
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    return code or 0
