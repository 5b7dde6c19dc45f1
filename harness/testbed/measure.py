"""Check an emulated network with a real gloo all-reduce, one process per emulated host.

    from harness.testbed import netns, measure
    s = netns.up(2, "500mbit")
    measure.measure_allreduce_busbw(s)   # {'busbw_gbit_s': 0.47..., 'busbw_over_rate': 0.95..., ...}

busbw follows nccl-tests' convention (PERFORMANCE.md there): algbw = S / t, busbw = algbw * 2(n-1)/n,
the rate each rank's link must carry for a ring all-reduce; it is comparable to the configured link rate.
For n = 2, busbw == algbw.
"""

from __future__ import annotations

import json
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time

from harness.errors import CellFailed, UserError
from harness.testbed.netns import host_command
from harness.testbed.state import TestbedState

_REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def busbw_factor(n: int) -> float:
    """nccl-tests' all-reduce bus-bandwidth factor 2(n-1)/n. Pure."""
    return 2 * (n - 1) / n


def measure_allreduce_busbw(
    state: TestbedState,
    size_bytes: int = 32 * 2**20,
    reps: int = 5,
    hosts: int = 2,
    warmup: int = 2,
    timeout_s: float = 120.0,
) -> dict:
    """Time `reps` gloo all-reduces of `size_bytes` between ranks on hosts 0..hosts-1 (after `warmup`).

    Returns sizes, the raw per-rep times (slowest rank), and from their median algbw/busbw in Gbit/s
    (10^9 bit/s) with busbw_over_rate = busbw / configured rate. Raises CellFailed if a rank fails or
    the whole run exceeds `timeout_s` (then every rank is killed)."""
    if not 2 <= hosts <= len(state.hosts):
        raise UserError(
            f"cannot measure on {hosts} hosts: the testbed has {len(state.hosts)}; "
            f"give 2..{len(state.hosts)} or bring up more hosts"
        )
    port = random.randint(20000, 59999)  # own port space per namespace; random avoids a concurrent run
    procs, logs = [], []
    try:
        for rank in range(hosts):
            env = dict(os.environ)
            env.update(
                RANK=str(rank), WORLD_SIZE=str(hosts), MASTER_ADDR=state.hosts[0].addr, MASTER_PORT=str(port),
                GLOO_SOCKET_IFNAME=state.hosts[rank].ifname, OMP_NUM_THREADS="1",
                PYTHONPATH=os.pathsep.join(p for p in (_REPO_ROOT, env.get("PYTHONPATH")) if p),
            )
            argv = host_command(rank, [
                sys.executable, "-m", "harness.testbed._allreduce_probe", "--size-bytes", str(size_bytes),
                "--reps", str(reps), "--warmup", str(warmup), "--timeout-s", str(timeout_s),
            ], state)
            out = tempfile.TemporaryFile(mode="w+")  # files, not pipes: a chatty rank cannot block
            logs.append(out)
            procs.append(subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT,
                                          start_new_session=True))
        deadline = time.monotonic() + timeout_s
        for rank, p in enumerate(procs):
            try:
                p.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                raise CellFailed(f"all-reduce probe exceeded {timeout_s:g} s (rank {rank} still running)",
                                 _tail(logs)) from None
            if p.returncode != 0:
                raise CellFailed(f"all-reduce probe rank {rank} exited with {p.returncode}", _tail(logs))
        logs[0].seek(0)
        lines = [ln for ln in logs[0].read().splitlines() if ln.startswith("{")]
        if not lines:
            raise CellFailed("all-reduce probe rank 0 printed no result", _tail(logs))
        times = json.loads(lines[-1])["times_s"]
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        for f in logs:
            f.close()

    t = statistics.median(times)
    algbw = size_bytes * 8 / t / 1e9
    busbw = algbw * busbw_factor(hosts)
    return {
        "hosts": hosts,
        "size_bytes": size_bytes,
        "reps": reps,
        "times_s": times,
        "time_s_median": t,
        "algbw_gbit_s": algbw,
        "busbw_gbit_s": busbw,
        "rate_mbit": state.rate_mbit,
        "busbw_over_rate": busbw * 1e3 / state.rate_mbit,
    }


def _tail(logs: list, chars: int = 2000) -> str:
    parts = []
    for rank, f in enumerate(logs):
        f.seek(0)
        parts.append(f"--- rank {rank} ---\n{f.read()[-chars:]}")
    return "\n".join(parts)
