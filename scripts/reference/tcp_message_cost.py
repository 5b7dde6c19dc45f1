"""The host's cost per TCP message, measured on loopback (no NIC, no wire: what is left is the kernel
TCP stack - system calls, copies, wake-ups - and the caller's own overhead): two processes bounce a
small message back and forth with TCP_NODELAY; one message costs half a round trip.

    python scripts/reference/tcp_message_cost.py [--size 64] [--round-trips 20000] [--reps 5]

It grounds `per_message_s` of the study's TCP presets (harness/study/cluster.py). The caller
here is Python (about a microsecond per call on top of the kernel), so the figure is an upper bound of
what a C transport (NCCL's socket proxy, ps-lite) pays; on a shared machine the wake-ups wait for a
core, so take the minimum over repetitions, measured with nothing else running.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import time


def _echo(port: int, size: int) -> None:
    c = socket.create_connection(("127.0.0.1", port))
    c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    buf = bytearray(size)
    while True:
        n = c.recv_into(buf)
        if n == 0:
            return
        c.sendall(buf[:n])


def one_way_s(size: int = 64, round_trips: int = 20000, reps: int = 5) -> list[float]:
    """Seconds per one-way message, one value per repetition."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    port = srv.getsockname()[1]
    pid = os.fork()
    if pid == 0:
        try:
            _echo(port, size)
        finally:
            os._exit(0)
    s, _ = srv.accept()
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    msg, buf, out = b"x" * size, bytearray(size), []
    view = memoryview(buf)
    try:
        for _ in range(reps):
            t0 = time.perf_counter()
            for _ in range(round_trips):
                s.sendall(msg)
                got = 0
                while got < size:
                    got += s.recv_into(view[got:])
            out.append((time.perf_counter() - t0) / round_trips / 2)
    finally:
        s.close()
        srv.close()
        os.waitpid(pid, 0)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python scripts/reference/tcp_message_cost.py")
    ap.add_argument("--size", type=int, default=64, help="message bytes")
    ap.add_argument("--round-trips", type=int, default=20000)
    ap.add_argument("--reps", type=int, default=5)
    a = ap.parse_args(argv)
    t = one_way_s(a.size, a.round_trips, a.reps)
    print(
        f"TCP loopback, {a.size} B: one-way per message min {min(t) * 1e6:.1f} us, "
        f"median {statistics.median(t) * 1e6:.1f} us over {a.reps} x {a.round_trips} round trips; "
        f"load average {os.getloadavg()[0]:.1f}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
