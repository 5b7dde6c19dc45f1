"""Parameter servers as a simulation: the NICs and summing servers every push-pull crosses, the keys
exactly as the real schemes declare them, and the point-to-point link that makes this model reproduce a
measured push-pull benchmark (docs/ARCHITECTURE.md, "Predictor").

Dedicated server hosts (the study's layout): one worker node represents all, by symmetry. Co-located
servers (server s on worker host s mod nodes): every node's NIC is a resource of its own.
"""

from __future__ import annotations

import functools
import math

from harness.planning import MB, assign_servers, partition
from harness.predict.des import Event, Fifo, Sim
from harness.predict.model import ELEM_BYTES
from harness.predict.network import Cluster, Link

SERVER_GBYTE_S = 10.0
"""A server's summing rate, GB of pushes read per second (the PS models' default `server_gbyte_s`)."""


class ParameterServers:
    """Parameter-server resources for a cluster.

    Dedicated server hosts (the study's layout): one worker node represents all, by symmetry; its NIC
    carries its g workers' pushes and pulls, each server's NIC the pushes and pulls of all W workers
    for its keys. Co-located servers (server s on worker host s mod nodes, as on a testbed with no
    spare host): the symmetry is gone, so every node's NIC is a resource of its own; the server's
    host pushes and pulls through loopback (no NIC time) while its NIC carries the other workers'
    traffic beside its own workers' traffic to the other servers."""

    def __init__(self, sim: Sim, cluster: Cluster, server_gbyte_s: float, p2p=None):
        self.sim = sim
        link = p2p or cluster.inter
        self.bw = link.bytes_per_s
        self.lat = link.latency_s
        self.g = cluster.workers_per_node
        self.W = cluster.workers
        self.S = cluster.n_servers
        self.colocated = cluster.server_hosts == "colocated"
        self.nodes = cluster.nodes
        self.sum_bw = server_gbyte_s * 1e9
        def nic(name):
            return Fifo(sim, name, self.bw, link.burst_bytes, link.peak_bytes_per_s)
        if self.colocated:
            self.n_up = [nic(f"node{n}-up") for n in range(self.nodes)]
            self.n_down = [nic(f"node{n}-down") for n in range(self.nodes)]
        else:
            self.up, self.down = nic("node-up"), nic("node-down")
            self.s_up = [nic(f"server{s}-up") for s in range(self.S)]
            self.s_down = [nic(f"server{s}-down") for s in range(self.S)]
        self.s_cpu = [Fifo(sim, f"server{s}-sum") for s in range(self.S)]

    def push_pull(self, nbytes: float, server: int) -> tuple[Event, Event]:
        """(sent, done): `sent` fires when this worker's push has left its NIC (where ByteScheduler
        returns credit on PS), `done` when every worker holds the sum of this key. Push: worker NIC
        out + server NIC in; the server sums all W pushes; pull: server NIC out + worker NIC in."""
        if self.colocated:
            return self._push_pull_colocated(nbytes, server)
        sim, sent, done = self.sim, Event(self.sim), Event(self.sim)
        w_share, s_share = self.g * nbytes, self.W * nbytes

        def pull():
            end = max(self.s_up[server].reserve_bytes(s_share), self.down.reserve_bytes(w_share)) + self.lat
            sim.at(end - sim.now, done.fire)

        def add():
            sim.at(self.s_cpu[server].reserve(self.W * nbytes / self.sum_bw) - sim.now, pull)
        out = self.up.reserve_bytes(w_share)
        sim.at(out - sim.now, sent.fire)
        end = max(out, self.s_down[server].reserve_bytes(s_share)) + self.lat
        sim.at(end - sim.now, add)
        return sent, done

    def _push_pull_colocated(self, nbytes: float, server: int) -> tuple[Event, Event]:
        """Every node pushes at once (all workers run the same schedule); `sent` and `done` are the
        slowest node's, as every rank waits for the slowest."""
        sim, sent, done = self.sim, Event(self.sim), Event(self.sim)
        home = server % self.nodes
        remote = [n for n in range(self.nodes) if n != home]
        share = self.g * nbytes
        outs = [self.n_up[n].reserve_bytes(share) for n in remote]
        inn = self.n_down[home].reserve_bytes(share * len(remote)) if remote else sim.now
        sim.at(max(outs, default=sim.now) - sim.now, sent.fire)
        lat = self.lat if remote else 0.0

        def pull():
            ends = [self.n_down[n].reserve_bytes(share) for n in remote]
            end = max([self.n_up[home].reserve_bytes(share * len(remote)) if remote else sim.now] + ends) + lat
            sim.at(end - sim.now, done.fire)

        def add():
            sim.at(self.s_cpu[server].reserve(self.W * nbytes / self.sum_bw) - sim.now, pull)
        sim.at(max(outs + [inn]) + lat - sim.now, add)
        return sent, done


@functools.lru_cache(maxsize=256)
def _plan_keys(numels: tuple, part_bytes: int, servers: int):
    parts = partition(list(numels), list(range(len(numels))), ELEM_BYTES, part_bytes)
    placement = assign_servers([pt.numel for pt in parts], servers) if servers else []
    return parts, placement


def ps_parts(c, partition_mb: float, servers: int):
    """The keys exactly as BucketSync/ByteScheduler declare them (partition(), priority = parameter
    index) and their servers (assign_servers(), as PSClient.declare places them). Cached: the same
    model and placement recur across methods and scales."""
    return _plan_keys(tuple(c.numels), int(partition_mb * MB), servers)


def _pushpull_s(cluster: Cluster, link, size: int, part: int, server_gbyte_s: float) -> float:
    """Simulated time of one `ddlbench commbench --collective pushpull` repetition: `size` bytes as one
    key (below a partition) or as size // part keys of `part` bytes, all pushed at once, every worker
    waiting for every pull."""
    sim = Sim()
    ps = ParameterServers(sim, cluster, server_gbyte_s, link)
    keys = [size] if size < part else [part] * (size // part)
    where = assign_servers(keys, ps.S)
    done = [ps.push_pull(k, s)[1] for k, s in zip(keys, where)]

    def main():
        yield done
    sim.process(main())
    return sim.run()


def ps_link_from_pushpull(times: dict[int, float], small_mean_s: float, cluster: Cluster, part: int,
                          server_gbyte_s: float, burst_bytes: float = 0.0, peak_gbit_s: float = math.inf):
    """The point-to-point link that makes the simulated parameter server reproduce a measured push-pull
    benchmark on `cluster`'s layout (workers, servers, where the servers sit): latency = half the mean
    small-message push-pull (a push and a pull), rate from the slope between the two largest sizes
    (the simulator's slope at a trial rate, scaled: transfer time is linear in 1 / rate). Like
    link_from_allreduce inverts the ring model, this inverts the PS model, so whatever the real
    transport adds per byte (both directions sharing one connection, the server's receive threads)
    is carried into the prediction. times: size -> median seconds (sizes past the token bucket)."""
    big = sorted(s for s in times if s >= 2 * part)[-2:]
    if len(big) < 2:
        raise ValueError("need two push-pull sizes of at least two partitions")
    lat = small_mean_s / 2
    trial = Link("trial", 1.0, lat)
    sim_slope = (_pushpull_s(cluster, trial, big[1], part, server_gbyte_s)
                 - _pushpull_s(cluster, trial, big[0], part, server_gbyte_s)) / (big[1] - big[0])
    measured_slope = (times[big[1]] - times[big[0]]) / (big[1] - big[0])
    if measured_slope <= 0:
        raise ValueError("push-pull times do not grow with the size")
    rate = sim_slope / measured_slope
    return Link("commbench-pushpull", rate, lat,
                f"fitted to push-pull times on {cluster.nodes} hosts x {cluster.workers_per_node}, "
                f"{cluster.n_servers} server(s) {cluster.server_hosts}", burst_bytes, max(peak_gbit_s, rate))
