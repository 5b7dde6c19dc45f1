"""Horovod on placed ranks (the emulated testbed, docs/ARCHITECTURE.md "Testbed"): every rank is spawned
by ddlbench inside its host, so nobody runs horovodrun. This does what horovodrun would: it starts
Horovod's gloo rendezvous server (an HTTP key-value store) on the host of rank 0, where every rank can
reach it over the shaped links, and gives each rank the slot variables horovodrun gives it (HOROVOD_RANK,
HOROVOD_LOCAL_RANK, HOROVOD_CROSS_RANK, ...; horovod/runner/gloo_run.py), derived from where the ranks
really are.

    python -m harness.backends.horovod.placed --slots host0:2,host1:2 --np 4
        prints the server's port, serves until its standard input closes.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import subprocess
import sys

from harness.backends.horovod.launch import knob_env
from harness.core.errors import CellFailed
from harness.procs.argv import python_argv
from harness.procs.trampoline import orphan_proof

MODULE = "harness.backends.horovod.placed"


def slot_envs(groups: list[int]) -> tuple[str, list[dict[str, str]]]:
    """(horovodrun's -H slot list, each rank's slot variables) for ranks whose host index is `groups[r]`.
    Local ranks count up inside a host in rank order; the cross communicator of local rank L joins the
    hosts holding more than L ranks, in host order (as get_host_assignments builds it). Pure."""
    hosts = list(dict.fromkeys(groups))
    counts = {h: groups.count(h) for h in hosts}
    slots = ",".join(f"host{h}:{counts[h]}" for h in hosts)
    seen: dict[int, int] = {}
    envs = []
    for r, h in enumerate(groups):
        local = seen.get(h, 0)
        seen[h] = local + 1
        cross = [g for g in hosts if counts[g] > local]
        envs.append(
            {
                "HOROVOD_RANK": str(r),
                "HOROVOD_SIZE": str(len(groups)),
                "HOROVOD_LOCAL_RANK": str(local),
                "HOROVOD_LOCAL_SIZE": str(counts[h]),
                "HOROVOD_CROSS_RANK": str(cross.index(h)),
                "HOROVOD_CROSS_SIZE": str(len(cross)),
                "HOROVOD_HOSTNAME": f"host{h}",
                "HOROVOD_CONTROLLER": "gloo",
                "HOROVOD_CPU_OPERATIONS": "gloo",
            }
        )
    return slots, envs


@contextlib.contextmanager
def placed_session(cell, placement):
    """Around one cell whose ranks a Placement puts on hosts (argv prefixes): the rendezvous server on rank
    0's host, and a Placement whose per-rank environment carries the slot variables. A placement without
    prefixes (every rank on this box) is returned unchanged: there horovodrun launches (launch.py)."""
    if not placement.prefixes:
        yield placement
        return
    prefixes = list(placement.prefixes)[: cell.workers]
    host_of = {p: i for i, p in enumerate(dict.fromkeys(map(tuple, prefixes)))}
    slots, envs = slot_envs([host_of[tuple(p)] for p in prefixes])
    argv = list(prefixes[0]) + orphan_proof([*python_argv(), "-m", MODULE, "--slots", slots, "--np", str(cell.workers)])
    server = subprocess.Popen(
        argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        line = server.stdout.readline().strip()
        if not line.isdigit():
            err = server.stderr.read() if server.poll() is not None else ""
            raise CellFailed(f"Horovod's rendezvous server did not start on rank 0's host: {line or err.strip()}")
        common = {
            "HOROVOD_GLOO_RENDEZVOUS_ADDR": placement.master_addr,
            "HOROVOD_GLOO_RENDEZVOUS_PORT": line,
            **knob_env(cell.knobs or {}),
        }
        given = list(placement.envs) + [{}] * (cell.workers - len(placement.envs))
        ranks = []
        for r, slot in enumerate(envs):
            env = {**given[r], **common, **slot}
            if "GLOO_SOCKET_IFNAME" in env:  # Horovod's own name for the interface gloo binds
                env["HOROVOD_GLOO_IFACE"] = env["GLOO_SOCKET_IFNAME"]
            ranks.append(env)
        yield dataclasses.replace(placement, envs=tuple(ranks) + tuple(placement.envs[cell.workers :]))
    finally:
        with contextlib.suppress(OSError):
            server.stdin.close()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog=f"python -m {MODULE}")
    ap.add_argument("--slots", required=True, help="horovodrun -H style: host0:2,host1:2")
    ap.add_argument("--np", type=int, required=True, help="number of ranks")
    a = ap.parse_args(argv)
    from horovod.runner.common.util.hosts import get_host_assignments, parse_hosts
    from horovod.runner.http.http_server import RendezvousServer

    server = RendezvousServer(verbose=0)
    port = server.start()
    server.init(get_host_assignments(parse_hosts(a.slots), a.np))
    print(port, flush=True)
    sys.stdin.read()  # serve until the launcher closes our standard input (or dies: the trampoline)
    server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
