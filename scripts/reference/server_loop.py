"""A parameter server's loop, timed on this machine: what one push costs a server per message and per byte.

BytePS's server (byteps/server/server.cc) receives each worker's push of a partition, keeps the first as the
running sum and adds every later one into it (a memory-bound dst += src, 4 OpenMP threads per sum), copies
the result into its store after the last, and answers the pulls. This script runs the same loop over
kernel TCP on loopback - one server process, `--workers` pushing processes, a push and a pull per partition
per round - at several partition sizes, and fits round time = messages x per-message cost + bytes x
per-byte cost. Separately it times the summation alone (torch add_ on float32, one and all threads).

    python scripts/reference/server_loop.py [--workers 2] [--rounds 200] [--reps 3] [--out FILE.json]

It grounds `server_recv_s` and `server_sum_gbyte_s` of the study's cluster (harness/study/inputs.py)
as measurements of *this* host: the study's servers were Xeon hosts with more cores and memory channels, so
the inputs keep their ranges. Run it with nothing else on the machine (check `uptime`); on a shared core
the wake-ups wait for the CPU, so the minimum over repetitions is the figure.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import sys
import time

import numpy as np
import torch

SIZES = (4096, 65536, 1048576, 4096000)
"""Partition sizes in bytes: a small key, two middle ones, and the study's BYTEPS_PARTITION_BYTES."""


def _recv_exact(s: socket.socket, view: memoryview) -> None:
    got = 0
    while got < len(view):
        n = s.recv_into(view[got:])
        if n == 0:
            raise ConnectionError("peer closed")
        got += n


def _worker(port: int, size: int, rounds: int) -> None:
    c = socket.create_connection(("127.0.0.1", port))
    c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    data = np.ones(size // 4, dtype=np.float32).tobytes()
    back = bytearray(size)
    for _ in range(rounds):
        c.sendall(data)  # push
        _recv_exact(c, memoryview(bytearray(1)))  # its ack
        c.sendall(b"p")  # pull request
        _recv_exact(c, memoryview(back))  # the sum
    c.close()


def round_s(size: int, workers: int, rounds: int) -> float:
    """Seconds per round (every worker pushes one partition of `size` bytes and pulls the sum)."""
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", 0))
    srv.listen(workers)
    port = srv.getsockname()[1]
    pids = []
    for _ in range(workers):
        pid = os.fork()
        if pid == 0:
            try:
                _worker(port, size, rounds)
            finally:
                os._exit(0)
        pids.append(pid)
    conns = [srv.accept()[0] for _ in range(workers)]
    for c in conns:
        c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    n = size // 4
    bufs = [torch.empty(n, dtype=torch.float32) for _ in range(workers)]
    views = [memoryview(b.numpy()).cast("B") for b in bufs]
    store = torch.empty(n, dtype=torch.float32)
    store_view = memoryview(store.numpy()).cast("B")
    one = memoryview(bytearray(1))
    t0 = time.perf_counter()
    for _ in range(rounds):
        for k, c in enumerate(conns):  # pushes, in arrival order per connection
            _recv_exact(c, views[k])
            c.sendall(b"a")
            if k:
                bufs[0].add_(bufs[k])  # n - 1 sums into the first push
        store.copy_(bufs[0])  # the merged copy into the store
        for c in conns:  # pulls, answered from the store
            _recv_exact(c, one)
            c.sendall(store_view)
    dt = (time.perf_counter() - t0) / rounds
    for c in conns:
        c.close()
    for pid in pids:
        os.waitpid(pid, 0)
    srv.close()
    return dt


def sum_gbyte_s(size: int = 4096000, threads: int = 1, reps: int = 200) -> float:
    """Source bytes summed per second by dst += src on float32 (torch add_), `threads` intra-op threads."""
    torch.set_num_threads(threads)
    a = torch.ones(size // 4)
    b = torch.ones(size // 4)
    for _ in range(10):
        a.add_(b)
    t0 = time.perf_counter()
    for _ in range(reps):
        a.add_(b)
    return size * reps / (time.perf_counter() - t0) / 1e9


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python scripts/reference/server_loop.py")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=200)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--out", help="write the figures as JSON here")
    a = ap.parse_args(argv)
    if a.workers < 1 or a.rounds < 1 or a.reps < 1:
        print("error: --workers, --rounds and --reps must be >= 1", file=sys.stderr)
        return 2
    load = os.getloadavg()[0]
    rows = []
    for size in SIZES:
        rounds = max(5, a.rounds * 4096 // max(4096, size // 16))
        best = min(round_s(size, a.workers, rounds) for _ in range(a.reps))
        rows.append((size, best))
        print(f"partition {size:>8} B, {a.workers} workers: {best * 1e6:9.1f} us per round (best of {a.reps})")
    # per round: each worker's push, ack, pull request and response = 4 messages; bytes received and sent
    msgs = 4 * a.workers
    x = np.array([[msgs, 2 * a.workers * s] for s, _ in rows], dtype=float)
    y = np.array([t for _, t in rows])
    (per_msg, per_byte), *_ = np.linalg.lstsq(x, y, rcond=None)
    sums = {
        t: statistics.median(sum_gbyte_s(4096000, t) for _ in range(a.reps)) for t in sorted({1, os.cpu_count() or 1})
    }
    out = {
        "load_before": load,
        "workers": a.workers,
        "rounds_s": {str(s): t for s, t in rows},
        "per_message_s": float(per_msg),
        "per_byte_s": float(per_byte),
        "server_gbyte_s_through_tcp": float(1 / per_byte / 1e9) if per_byte > 0 else None,
        "sum_gbyte_s": {str(t): v for t, v in sums.items()},
        "cpu_count": os.cpu_count(),
        "torch": torch.__version__,
    }
    print(
        f"fit: {per_msg * 1e6:.1f} us per message, {per_byte * 1e9:.3f} ns per byte moved through the server "
        f"({out['server_gbyte_s_through_tcp']:.2f} GB/s); summation alone: "
        + ", ".join(f"{v:.1f} GB/s with {t} thread(s)" for t, v in sums.items())
        + f"; load before {load:.2f}"
    )
    if a.out:
        with open(a.out, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
