"""Where each rank of a cell runs on the emulated testbed, as a Placement for the spawner (harness/spawner/cell.py).

    from harness.testbed import netns, placement
    s = netns.up(2, "500mbit")
    cell = cell.with_(nodes=placement.nodes_for(cell.workers, len(s.hosts)))
    launch_cell(cell, cell_dir, placement.testbed_placement(cell, s))

Rules (the pure `rank_hosts` decides, `testbed_placement` turns it into argv prefixes and environment):
- workers (ranks 0..W-1) go onto hosts 0..cell.nodes-1, round-robin (rank r on host r mod nodes) or
  blocked (consecutive ranks share a host, block sizes differ by at most one);
- parameter servers (ranks W..W+S-1) follow the cell's `server_hosts` (docs/ARCHITECTURE.md, "Server
  placement"): `auto` gives them hosts of their own when the testbed has hosts no worker uses (the
  study put servers on separate machines), else they share the worker hosts, server j on host
  j mod nodes; `dedicated` insists on the spare hosts (a cell then leaves at least one host to its
  servers, `cell_nodes`), `colocated` insists on the worker hosts;
- every rank rendezvous at host 0 (rank 0 is always there) and binds gloo/tensorpipe/nccl to the host's
  testbed interface, so no byte takes a path outside the shaped links (ranks on one host talk locally,
  as on a real node).
"""

from __future__ import annotations

import json

from harness.contracts.cell import CellSpec, server_placement
from harness.contracts.placement import Placement
from harness.core.errors import UserError
from harness.testbed import cgroups, netns
from harness.testbed.state import TestbedState

POLICIES = ("round-robin", "blocked")
"""How workers are spread over hosts: rank r on host r mod nodes, or consecutive ranks together."""
IFNAME_VARS = ("GLOO_SOCKET_IFNAME", "TP_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME")
"""Interface variables of gloo, tensorpipe (torch RPC) and nccl; all point at the testbed interface."""


def nodes_for(workers: int, hosts: int) -> int:
    """Hosts a cell of `workers` workers uses on a testbed of `hosts` hosts: one worker per host first."""
    return max(1, min(workers, hosts))


def check_policy(policy: str) -> str:
    if policy not in POLICIES:
        raise UserError(
            f"unknown placement {policy!r}: use one of {', '.join(POLICIES)} "
            f"(`placement:` under `testbed:` in the sweep file)"
        )
    return policy


def worker_hosts(workers: int, nodes: int, policy: str = "round-robin") -> list[int]:
    """Host index of each worker rank. Pure."""
    check_policy(policy)
    if policy == "round-robin":
        return [r % nodes for r in range(workers)]
    return [r * nodes // workers for r in range(workers)]  # contiguous, balanced, every host used


def cell_nodes(cell: CellSpec, hosts: int, worker_hosts: int | None = None) -> int:
    """Hosts that carry the workers of `cell` on a testbed of `hosts` hosts: one worker per host first, on
    `worker_hosts` of them when given (the sweep's `testbed: {worker_hosts:}`), else on all but the last
    when the cell asks for dedicated server hosts. Pure."""
    usable = min(hosts, worker_hosts or hosts)
    if cell.servers and cell.server_hosts == "dedicated" and worker_hosts is None:
        usable = hosts - 1
    return nodes_for(cell.workers, max(1, usable))


def server_hosts(servers: int, nodes: int, hosts: int, mode: str = "auto") -> list[int]:
    """Host index of each parameter server: the spare hosts (hosts nodes..hosts-1) when `mode` is dedicated,
    or auto and there are spare hosts; else the worker hosts, server j on host j mod nodes. Pure."""
    spare = hosts - nodes
    where = server_placement(
        CellSpec(workload="-", scheme="-", servers=servers, server_hosts=mode),
        spare,
        f"a testbed of {hosts} hosts with workers on {nodes}",
    )
    if where == "dedicated":
        return [nodes + j % spare for j in range(servers)]
    return [j % nodes for j in range(servers)]


def rank_hosts(
    workers: int, servers: int, nodes: int, hosts: int, policy: str = "round-robin", mode: str = "auto"
) -> list[int]:
    """Host index of every rank (workers first, then servers), checked against the testbed; `mode` is the
    cell's server_hosts. Pure."""
    if not 1 <= nodes <= hosts:
        raise UserError(
            f"the cell spans {nodes} nodes but the testbed has {hosts} hosts; bring up a "
            f"bigger testbed (`ddlbench testbed up --hosts {nodes}`) or use fewer nodes"
        )
    if nodes > workers:
        raise UserError(
            f"{nodes} nodes for {workers} worker(s) would leave a host without a worker; use at most {workers} nodes"
        )
    return worker_hosts(workers, nodes, policy) + server_hosts(servers, nodes, hosts, mode)


def check_device(cell: CellSpec, gpus: int) -> None:
    """A CUDA cell on the testbed needs a GPU of its own for every worker (ranks in different namespaces
    must not share one); otherwise the testbed runs CPU cells. Pure."""
    if cell.device == "cuda" and cell.workers > gpus:
        raise UserError(
            f"{cell.workers} CUDA workers on the testbed need a GPU each, and this machine has "
            f"{gpus}; run the testbed with --device cpu or fewer workers"
        )


def gpu_env(worker: int, netns: str) -> dict[str, str]:
    """What a CUDA worker on emulated host `netns` needs so that its traffic crosses the shaped links: its
    own GPU, and NCCL told that hosts differ (NCCL_HOSTID; by default every namespace looks like the same
    host) and to use sockets only (no peer-to-peer, shared memory or InfiniBand between "hosts"). Pure."""
    return {
        "CUDA_VISIBLE_DEVICES": str(worker),
        "NCCL_HOSTID": netns,
        "NCCL_P2P_DISABLE": "1",
        "NCCL_SHM_DISABLE": "1",
        "NCCL_IB_DISABLE": "1",
    }


def testbed_placement(cell: CellSpec, state: TestbedState, policy: str = "round-robin") -> Placement:
    """The Placement that runs `cell` on `state`'s hosts (cell.nodes of them carry workers)."""
    hosts = rank_hosts(cell.workers, cell.servers, cell.nodes, len(state.hosts), policy, cell.server_hosts)
    envs = []
    for r, h in enumerate(hosts):
        here = [q for q, g in enumerate(hosts) if g == h]
        ifname = state.hosts[h].ifname
        env = {var: ifname for var in IFNAME_VARS}
        # The local launcher derives these assuming blocked workers on cell.nodes hosts; state the truth.
        env.update(
            NODE_RANK=str(h),
            GROUP_RANK=str(h),
            LOCAL_RANK=str(here.index(r)),
            LOCAL_WORLD_SIZE=str(len(here)),
            GROUP_WORLD_SIZE=str(len(set(hosts))),
            DDLBENCH_TESTBED_HOST=state.hosts[h].netns,
        )
        if cell.device == "cuda" and r < cell.workers:
            env.update(gpu_env(r, state.hosts[h].netns), LOCAL_RANK="0")  # its one visible GPU
        envs.append(env)
    return Placement(
        master_addr=state.hosts[0].addr,
        prefixes=tuple(tuple(state.nsenter(h)) for h in hosts),
        envs=tuple(envs),
        nodes=cell.nodes,
    )


def testbed_up() -> TestbedState:
    """The testbed that is up, for a command told to run on it (`--testbed`): a one-line error when there is
    none, or when this system cannot hold one."""
    netns.check_system()
    s = netns.status()
    if s is None:
        raise UserError(
            "--testbed needs a testbed that is up, and none is: start one with "
            "`ddlbench testbed up --hosts 2 --rate 500mbit`"
        )
    return s


def cpu_columns(host_cpus: float | None, host_cores: int | None) -> dict:
    """The environment row's record of the hosts' processors (None: no share, every core). Pure."""
    return {"testbed_host_cpus": host_cpus, "testbed_host_cores": host_cores}


def throttling(state: TestbedState) -> dict[str, tuple[int, float]]:
    """Every host's CFS throttling so far (periods, seconds) by namespace, read from its cpu group's cpu.stat;
    {} without a share."""
    out = {}
    for h in state.hosts:
        got = cgroups.throttling(h.cgroups[0]) if h.cgroups else None
        if got is not None:
            out[h.netns] = got
    return out


def throttled_over(before: dict, after: dict, where: dict) -> dict:
    """A cell's throttling from `throttling` before and after it, over the hosts its ranks ran on
    (`where`: `describe`'s record): totals and, per host, [periods, seconds] as JSON. Pure."""
    used = [h for h in dict.fromkeys(where.get("rank_hosts", ())) if h in before and h in after]
    if not used:
        return {}
    per = {h: [after[h][0] - before[h][0], round(after[h][1] - before[h][1], 6)] for h in used}
    return {
        "throttled_periods": sum(p for p, _ in per.values()),
        "throttled_s": sum(t for _, t in per.values()),
        "throttled_json": json.dumps(per, sort_keys=True),
    }


def describe(cell: CellSpec, state: TestbedState, policy: str = "round-robin") -> dict:
    """What the result records about where the ranks ran (rank -> host namespace) and each host's processors."""
    hosts = rank_hosts(cell.workers, cell.servers, cell.nodes, len(state.hosts), policy, cell.server_hosts)
    return {
        "testbed_hosts": len(state.hosts),
        "host_cpus": state.host_cpus,
        "host_cores": state.host_cores,
        "rate_mbit": state.rate_mbit,
        "placement": policy,
        "rank_hosts": [state.hosts[h].netns for h in hosts],
        "server_hosts": "dedicated"
        if any(h >= cell.nodes for h in hosts[cell.workers :])
        else ("colocated" if cell.servers else ""),
    }
