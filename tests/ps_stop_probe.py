"""The `torch` backend's parameter-server stop protocol, repeated (tests/integration/processes/test_ps_shutdown.py).

    python -P tests/ps_stop_probe.py ROUNDS PORT

Each round forks 4 workers (2 nodes x 2, node-local reduce on: workers stop their node peers too) and
2 servers, which join a gloo group (a prefix of one TCP store), push and pull two keys once, wait a
random 0-30 ms (so that ranks stop in every order), stop, and exit as the worker does. A stop message sent to a rank
that has already left fails in gloo ("Connection closed by peer"): the race of issue 24. Exit 0 when every round
of every rank stopped cleanly.
"""

from __future__ import annotations

import datetime
import random
import sys
import time
import traceback

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from harness.backends.torch_dist.ps import PSClient
from harness.backends.torch_dist.ps_server import serve
from harness.contracts.training import exit_now

WORKERS, SERVERS = 4, 2
NODES = [0, 0, 1, 1]


def _round(rank: int, world: int, port: int, i: int) -> None:
    """One rank of one round, in a process of its own, which then leaves as the worker does."""
    try:
        base = dist.TCPStore("127.0.0.1", port, world, is_master=False, timeout=datetime.timedelta(seconds=30))
        dist.init_process_group(
            "gloo",
            store=dist.PrefixStore(f"round{i}", base),
            rank=rank,
            world_size=world,
            timeout=datetime.timedelta(seconds=30),
        )
        if rank >= WORKERS:
            serve(WORKERS, SERVERS, rank)
        else:
            client = PSClient(WORKERS, SERVERS, rank, NODES, True, torch.device("cpu"))
            client.declare([("a", 16), ("b", 8)])
            a, b = torch.full((16,), float(rank)), torch.full((8,), 1.0)
            for h in [client.push_pull(a, "a"), client.push_pull(b, "b")]:
                h.wait()
            assert a.sum().item() == 16 * sum(range(WORKERS)) and b.sum().item() == 8 * WORKERS, (a, b)
            time.sleep(random.Random(rank * 7919 + i).random() * 0.03)
            client.stop()
        dist.destroy_process_group()
    except Exception:
        print(f"rank {rank} round {i}: stop failed", file=sys.stderr, flush=True)
        traceback.print_exc()
        exit_now(1)
    exit_now(0)  # as the worker leaves (harness/contracts/training.py: torch's destructors may abort at teardown)


def _store(port: int) -> None:
    store = dist.TCPStore("127.0.0.1", port, None, is_master=True, wait_for_workers=False)
    time.sleep(3600)
    del store


def main() -> int:
    rounds, port = int(sys.argv[1]), int(sys.argv[2])
    world = WORKERS + SERVERS
    torch.set_num_threads(1)
    # Each round's ranks are forked from this process (no re-import of torch per rank); the store lives
    # in a process of its own, because forking a process that runs the store's threads can deadlock.
    ctx = mp.get_context("fork")
    store = ctx.Process(target=_store, args=(port,), daemon=True)
    store.start()
    for i in range(rounds):
        procs = [ctx.Process(target=_round, args=(r, world, port, i)) for r in range(world)]
        for p in procs:
            p.start()
        for p in procs:
            p.join(timeout=60)
        codes = [p.exitcode for p in procs]
        if codes != [0] * world:
            for p in procs:
                if p.exitcode is None:
                    p.kill()
            print(f"round {i}: exit codes by rank {codes}", flush=True)
            return 1
    store.kill()
    print(f"{rounds} rounds stopped cleanly", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
