"""ps-lite's ZeroMQ van, timed on this machine: how many bytes per second one ZeroMQ I/O thread moves at the
study's partition size, one direction and both at once.

Without RDMA (the study's IPoIB and 10 GbE runs set DMLC_ENABLE_RDMA=0, ddl-benchmarks/byteps/launch.sh) BytePS's
workers and servers talk through ps-lite's ZMQVan: one ZeroMQ context per process with its default single I/O
thread, a ROUTER socket receiving from every peer and a DEALER socket per peer sending, each message a
multipart of a small meta frame and the data frame, the data handed to ZeroMQ without a copy
(zmq_msg_init_data) and received into ZeroMQ's own buffer. Every byte a process sends or receives is written
to or read from a kernel socket by that one I/O thread: pushes and pulls share it. This script builds the same
arrangement with pyzmq over TCP on loopback - a "worker" process and a "server" process, each one context with
one I/O thread, a ROUTER bound and a DEALER connected to the other - and times

  one-way   the worker pushes partitions as fast as the server takes them;
  both      the worker pushes while the server sends partitions back (pulls) at the same time: the worker's
            I/O thread writes one stream and reads the other.

    python scripts/reference/zmq_van.py [--size 4096000] [--seconds 3] [--quick] [--out FILE.json]

It grounds `zmq_van_gbyte_s` of the study's cluster (harness/study/inputs.py) as a measurement of *this*
host's cores and kernel TCP (loopback has no NIC interrupts, and the two processes share this machine's 2
cores: the input keeps a range). Run it with nothing else on the machine (check `uptime`).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import platform
import sys
import time

import zmq

PARTITION = 4_096_000
"""BYTEPS_PARTITION_BYTES of the study (ddl-benchmarks/byteps/launch.sh)."""
WINDOW = 8
"""Partitions in flight per direction (ZeroMQ's high-water mark keeps the pipe full)."""


def _endpoint(sock: zmq.Socket) -> str:
    sock.bind("tcp://127.0.0.1:*")
    return sock.getsockopt_string(zmq.LAST_ENDPOINT)


def _context() -> zmq.Context:
    return zmq.Context(io_threads=1)  # ps-lite's ZMQVan: zmq_ctx_new() keeps ZeroMQ's default of one


def _server(conn, size: int, seconds: float, send_back: bool) -> None:
    ctx = _context()
    router = ctx.socket(zmq.ROUTER)
    conn.send(_endpoint(router))
    worker_ep = conn.recv()
    dealer = ctx.socket(zmq.DEALER)
    dealer.setsockopt(zmq.SNDHWM, WINDOW)
    dealer.connect(worker_ep)
    payload = memoryview(bytearray(size))
    meta = b"pull-response"
    got = sent = 0
    poller = zmq.Poller()
    poller.register(router, zmq.POLLIN)
    if send_back:
        poller.register(dealer, zmq.POLLOUT)
    t_end = None
    while True:
        for sock, _ in poller.poll(100):
            if sock is router:
                frames = router.recv_multipart(copy=False)
                if frames[1].bytes == b"stop":
                    t_end = time.perf_counter()
                    break
                got += len(frames[2])
            elif send_back:
                dealer.send_multipart([meta, payload], copy=False)
                sent += size
        if t_end is not None:
            break
    conn.send({"received_bytes": got, "sent_bytes": sent})
    dealer.close(linger=0)
    router.close(linger=0)
    ctx.term()


def measure(size: int, seconds: float, both: bool) -> dict:
    """Bytes per second through the worker's one I/O thread."""
    mp_ctx = mp.get_context("spawn")
    parent, child = mp_ctx.Pipe()
    proc = mp_ctx.Process(target=_server, args=(child, size, seconds, both), daemon=True)
    proc.start()
    server_ep = parent.recv()
    ctx = _context()
    router = ctx.socket(zmq.ROUTER)
    parent.send(_endpoint(router))
    dealer = ctx.socket(zmq.DEALER)
    dealer.setsockopt(zmq.SNDHWM, WINDOW)
    dealer.connect(server_ep)
    payload = memoryview(bytearray(size))
    meta = b"push"
    poller = zmq.Poller()
    poller.register(dealer, zmq.POLLOUT)
    poller.register(router, zmq.POLLIN)
    sent = got = 0
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        for sock, _ in poller.poll(100):
            if sock is dealer:
                dealer.send_multipart([meta, payload], copy=False)
                sent += size
            else:
                frames = router.recv_multipart(copy=False)
                got += len(frames[2])
    dealer.send_multipart([b"stop"])
    wall = time.perf_counter() - t0
    peer = parent.recv()
    proc.join(10)
    dealer.close(linger=0)
    router.close(linger=0)
    ctx.term()
    # what the server took is what crossed (the worker's last sends may still be queued in ZeroMQ)
    pushed = min(sent, peer["received_bytes"])
    moved = pushed + got
    return {
        "mode": "both" if both else "one-way",
        "size_bytes": size,
        "seconds": wall,
        "pushed_bytes": pushed,
        "pulled_bytes": got,
        "push_gbyte_s": pushed / wall / 1e9,
        "pull_gbyte_s": got / wall / 1e9,
        "io_thread_gbyte_s": moved / wall / 1e9,
    }


def run(size: int = PARTITION, seconds: float = 3.0, reps: int = 3) -> dict:
    out = {
        "command": f"python scripts/reference/zmq_van.py --size {size} --seconds {seconds} --reps {reps}",
        "python": platform.python_version(),
        "pyzmq": zmq.__version__,
        "libzmq": zmq.zmq_version(),
        "cpus": os.cpu_count(),
        "load_before": os.getloadavg()[0],
        "runs": [],
    }
    for _ in range(reps):
        for both in (False, True):
            out["runs"].append(measure(size, seconds, both))
    for mode in ("one-way", "both"):
        rs = [r["io_thread_gbyte_s"] for r in out["runs"] if r["mode"] == mode]
        out[f"{mode}_gbyte_s_best"] = max(rs)
        out[f"{mode}_gbyte_s_all"] = rs
    out["load_after"] = os.getloadavg()[0]
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python scripts/reference/zmq_van.py")
    ap.add_argument("--size", type=int, default=PARTITION, help="bytes per message (default: the study's partition)")
    ap.add_argument("--seconds", type=float, default=3.0, help="seconds per run")
    ap.add_argument("--reps", type=int, default=3, help="runs per mode")
    ap.add_argument("--quick", action="store_true", help="one short run per mode (tests)")
    ap.add_argument("--out", help="write the figures as JSON here")
    a = ap.parse_args(argv)
    if a.size < 1 or a.seconds <= 0 or a.reps < 1:
        print(
            "error: --size, --seconds and --reps must be positive; the defaults are the study's partition, "
            "3 s and 3 runs",
            file=sys.stderr,
        )
        return 2
    res = run(a.size, 0.5 if a.quick else a.seconds, 1 if a.quick else a.reps)
    for r in res["runs"]:
        print(
            f"{r['mode']:<8} {r['size_bytes']} B: one I/O thread moves {r['io_thread_gbyte_s']:.2f} GB/s "
            f"(push {r['push_gbyte_s']:.2f}, pull {r['pull_gbyte_s']:.2f})"
        )
    print(
        f"best: one-way {res['one-way_gbyte_s_best']:.2f} GB/s, both directions {res['both_gbyte_s_best']:.2f} GB/s; "
        f"load {res['load_before']:.2f} before, {res['load_after']:.2f} after"
    )
    if a.out:
        with open(a.out, "w") as f:
            json.dump(res, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
