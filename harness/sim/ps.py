"""Parameter servers as a simulation: the NICs and summing servers every push-pull crosses, the keys
exactly as the real schemes declare them, and the point-to-point link that makes this model reproduce a
measured push-pull benchmark (docs/ARCHITECTURE.md, "Predictor").

Dedicated server hosts (the study's layout): one worker node represents all, by symmetry. Co-located
servers (server s on worker host s mod nodes): every node's NIC is a resource of its own.
"""

from __future__ import annotations

import functools
import math

from harness.grouping.cost import MB
from harness.grouping.rules import assign_servers, partition
from harness.sim.des import Event, Fifo, Sim
from harness.sim.links import Cluster, Link
from harness.sim.model import ELEM_BYTES

SERVER_GBYTE_S = 10.0
"""A server's summing rate, GB of pushes read per second (the PS models' default `server_gbyte_s`)."""


class ParameterServers:
    """Parameter-server resources for a cluster.

    Dedicated server hosts (the study's layout): one worker node represents all, by symmetry; its NIC
    carries its workers' pushes and pulls, each server's NIC the pushes and pulls of every node for
    its keys. Co-located servers (server s on worker host s mod nodes, as on a testbed with no
    spare host): the symmetry is gone, so every node's NIC is a resource of its own; the server's
    host pushes and pulls through loopback (no NIC time) while its NIC carries the other workers'
    traffic beside its own workers' traffic to the other servers.

    local_reduce (BytePS's hierarchy, the schemes' knob of that name, harness/backends/torch_dist/
    ps_layout.py): with g > 1 workers per node, a key's owner first gathers its g - 1 peers' copies over
    its own intra-node link, pushes one copy and pulls one, then sends the sum back to its peers; the
    keys' ownership is spread over the node's workers by bytes, so their links work in parallel.
    Without it every worker pushes and pulls its own copy (g per node).

    A shared host path (Cluster.host: GPUs without peer-to-peer) carries every intra-node hop and every
    NIC byte once into host memory and once out of it (staging), beside the links; a link's
    per_message_s is charged on the server's CPU for each push it receives and each pull it sends."""

    def __init__(self, sim: Sim, cluster: Cluster, server_gbyte_s: float, p2p=None, local_reduce: bool = False):
        self.sim = sim
        link = p2p or cluster.inter
        self.bw = link.bytes_per_s
        self.lat = link.message_s
        self.per_msg = link.per_message_s  # the server's CPU per message it receives or sends
        self.g = cluster.workers_per_node
        self.W = cluster.workers
        self.S = cluster.n_servers
        self.colocated = cluster.server_hosts == "colocated"
        self.nodes = cluster.nodes
        self.sum_bw = server_gbyte_s * 1e9
        self.hybrid = bool(local_reduce) and self.g > 1
        self.intra_lat = cluster.intra.message_s

        def nic(name):
            return Fifo(sim, name, self.bw, link.burst_bytes, link.peak_bytes_per_s)

        # the shared host path of each worker node (into / out of host memory), when GPUs stage there
        hosts = self.nodes if self.colocated else 1
        self.host = (
            None
            if cluster.host is None
            else [
                (
                    Fifo(sim, f"node{n}-host-in", cluster.host.bytes_per_s),
                    Fifo(sim, f"node{n}-host-out", cluster.host.bytes_per_s),
                )
                for n in range(hosts)
            ]
        )
        if self.colocated:
            self.n_up = [nic(f"node{n}-up") for n in range(self.nodes)]
            self.n_down = [nic(f"node{n}-down") for n in range(self.nodes)]
        else:
            self.up, self.down = nic("node-up"), nic("node-down")
            self.s_up = [nic(f"server{s}-up") for s in range(self.S)]
            self.s_down = [nic(f"server{s}-down") for s in range(self.S)]
        self.s_cpu = [Fifo(sim, f"server{s}-sum") for s in range(self.S)]
        # each worker's intra-node link, which carries the gathers and sends of the keys it owns (per
        # node; one node stands for all when the servers are dedicated), and the bytes each owns so far
        self.intra = [
            [Fifo(sim, f"node{n}-worker{w}-intra", cluster.intra.bytes_per_s) for w in range(self.g)]
            for n in range(self.nodes if self.colocated else 1)
        ]
        self.owned = [0.0] * self.g

    def staged(self, node: int, nbytes: float, end: float) -> float:
        """`nbytes` through node's host path, both directions at once (a copy into host memory and one
        out of it: a GPU's hop to a peer, or a NIC transfer staged for or from a GPU), as a stream
        beside whatever ends at `end`; returns when both are done."""
        if self.host is None or not nbytes:
            return end
        into, out = self.host[node]
        return max(end, into.reserve_bytes(nbytes), out.reserve_bytes(nbytes))

    def push_pull(self, nbytes: float, server: int) -> tuple[Event, Event]:
        """(sent, done): `sent` fires when this worker's push has left its NIC (where ByteScheduler
        returns credit on PS), `done` when every worker holds the sum of this key. Push: worker NIC
        out + server NIC in; the server sums all W pushes; pull: server NIC out + worker NIC in."""
        if self.hybrid:
            return self._push_pull_hybrid(nbytes, server)
        if self.colocated:
            return self._push_pull_colocated(nbytes, server)
        sent, done = Event(self.sim), Event(self.sim)
        self._dedicated(nbytes, server, self.g * nbytes, self.W, sent, done)
        return sent, done

    def _push_pull_hybrid(self, nbytes: float, server: int) -> tuple[Event, Event]:
        """local_reduce: gather the node's copies on the intra-node link, push and pull one copy per
        node (dedicated or co-located servers alike), send the sum back inside the node."""
        sim, sent, done = self.sim, Event(self.sim), Event(self.sim)
        peers = (self.g - 1) * nbytes
        owner = min(range(self.g), key=lambda w: (self.owned[w], w))  # as PSLayout spreads the duty
        self.owned[owner] += nbytes
        links = [node[owner] for node in self.intra]

        def scatter():
            end = max(self.staged(n, peers, link.reserve_bytes(peers)) for n, link in enumerate(links))
            sim.at(end + self.intra_lat - sim.now, done.fire)

        def push():
            pulled = Event(sim)
            pulled.on_fire(scatter)
            if self.colocated:
                self._colocated(nbytes, server, nbytes, self.nodes, sent, pulled)
            else:
                self._dedicated(nbytes, server, nbytes, self.nodes, sent, pulled)

        gathered = max(self.staged(n, peers, link.reserve_bytes(peers)) for n, link in enumerate(links))
        sim.at(gathered + self.intra_lat - sim.now, push)
        return sent, done

    def _dedicated(self, nbytes: float, server: int, share: float, copies: int, sent: Event, done: Event) -> None:
        """One node's `share` bytes out and back through its NIC; the server receives, sums and sends
        `copies` copies of the key."""
        sim, s_share = self.sim, copies * nbytes

        def pull():
            end = max(self.s_up[server].reserve_bytes(s_share), self.staged(0, share, self.down.reserve_bytes(share)))
            sim.at(end + self.lat - sim.now, done.fire)

        def add():
            sim.at(self.s_cpu[server].reserve(self._server_s(copies, nbytes)) - sim.now, pull)

        out = self.staged(0, share, self.up.reserve_bytes(share))
        sim.at(out - sim.now, sent.fire)
        end = max(out, self.s_down[server].reserve_bytes(s_share)) + self.lat
        sim.at(end - sim.now, add)

    def _push_pull_colocated(self, nbytes: float, server: int) -> tuple[Event, Event]:
        """Every node pushes at once (all workers run the same schedule); `sent` and `done` are the
        slowest node's, as every rank waits for the slowest."""
        sent, done = Event(self.sim), Event(self.sim)
        self._colocated(nbytes, server, self.g * nbytes, self.W, sent, done)
        return sent, done

    def _colocated(self, nbytes: float, server: int, share: float, copies: int, sent: Event, done: Event) -> None:
        """Every node's `share` bytes to the server's host and back; the server sums `copies` copies."""
        sim = self.sim
        home = server % self.nodes
        remote = [n for n in range(self.nodes) if n != home]
        outs = [self.staged(n, share, self.n_up[n].reserve_bytes(share)) for n in remote]
        inn = self.n_down[home].reserve_bytes(share * len(remote)) if remote else sim.now
        sim.at(max(outs, default=sim.now) - sim.now, sent.fire)
        lat = self.lat if remote else 0.0

        def pull():
            ends = [self.staged(n, share, self.n_down[n].reserve_bytes(share)) for n in remote]
            end = max([self.n_up[home].reserve_bytes(share * len(remote)) if remote else sim.now, *ends]) + lat
            sim.at(end - sim.now, done.fire)

        def add():
            sim.at(self.s_cpu[server].reserve(self._server_s(copies, nbytes)) - sim.now, pull)

        sim.at(max([*outs, inn]) + lat - sim.now, add)

    def _server_s(self, copies: int, nbytes: float) -> float:
        """A server's CPU for one key: sum `copies` pushes, and receive and send one message per copy."""
        return copies * nbytes / self.sum_bw + 2 * copies * self.per_msg


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
    waiting for every pull. The transport reduces inside a node first there too (local_reduce is its
    default, and commbench cells set no knobs)."""
    sim = Sim()
    ps = ParameterServers(sim, cluster, server_gbyte_s, link, local_reduce=True)
    keys = [size] if size < part else [part] * (size // part)
    where = assign_servers(keys, ps.S)
    done = [ps.push_pull(k, s)[1] for k, s in zip(keys, where)]

    def main():
        yield done

    sim.process(main())
    return sim.run()


def ps_link_from_pushpull(
    times: dict[int, float],
    small_mean_s: float,
    cluster: Cluster,
    part: int,
    server_gbyte_s: float,
    burst_bytes: float = 0.0,
    peak_gbit_s: float = math.inf,
):
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
    sim_slope = (
        _pushpull_s(cluster, trial, big[1], part, server_gbyte_s)
        - _pushpull_s(cluster, trial, big[0], part, server_gbyte_s)
    ) / (big[1] - big[0])
    measured_slope = (times[big[1]] - times[big[0]]) / (big[1] - big[0])
    if measured_slope <= 0:
        raise ValueError("push-pull times do not grow with the size")
    rate = sim_slope / measured_slope
    return Link(
        "commbench-pushpull",
        rate,
        lat,
        f"fitted to push-pull times on {cluster.nodes} hosts x {cluster.workers_per_node}, "
        f"{cluster.n_servers} server(s) {cluster.server_hosts}",
        burst_bytes,
        max(peak_gbit_s, rate),
    )
