"""Who pushes which key where, in the parameter server of the `torch` backend (pure).

BytePS, the parameter server the study measured, is hierarchical: the GPUs of one machine first reduce
each partition among themselves, one copy per machine is pushed to the partition's server and pulled
back, and the result is broadcast inside the machine; the push/pull duty of the partitions is spread
over the machine's GPUs (Jiang et al., OSDI 2020, section 4; docs/ARCHITECTURE.md, "Backend").

With `local_reduce` every node's workers form a group and each key has one *owner* per node, chosen so
that each local rank owns about the same number of bytes; the owner gathers its peers' partitions, sums
them, pushes once, pulls once and sends the result to its peers. Without it (the flat layout kept for
comparison) every worker is a group of one: it owns every key and pushes its whole gradient itself.
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.grouping.rules import assign_servers


@dataclass(frozen=True)
class PSLayout:
    numel: tuple[int, ...]
    """Elements of each key (a gradient partition), in declaration order."""
    server_of: tuple[int, ...]
    """Server index of each key (bytes balanced over the servers)."""
    groups: tuple[tuple[int, ...], ...]
    """Worker ranks of each node group, in node order; one rank per group without local reduce."""
    owners: tuple[tuple[int, ...], ...]
    """owners[k][g]: the worker that pushes key k for group g (sums its group's copies first)."""

    @classmethod
    def build(cls, numel: list[int], servers: int, node_of_worker: list[int], local_reduce: bool) -> PSLayout:
        """`node_of_worker[w]` is worker w's node (any labels; the same on every worker)."""
        if local_reduce:
            labels = sorted(set(node_of_worker), key=node_of_worker.index)
            groups = tuple(tuple(w for w, n in enumerate(node_of_worker) if n == label) for label in labels)
        else:
            groups = tuple((w,) for w in range(len(node_of_worker)))
        # Within a group, spread the keys' push/pull duty by bytes, like the servers' share.
        duty = [assign_servers(list(numel), len(g)) for g in groups]
        owners = tuple(tuple(g[duty[i][k]] for i, g in enumerate(groups)) for k in range(len(numel)))
        return cls(tuple(numel), tuple(assign_servers(list(numel), servers)), groups, owners)

    def group_of(self, worker: int) -> tuple[int, ...]:
        return next(g for g in self.groups if worker in g)

    def owner(self, key: int, worker: int) -> int:
        """The worker of `worker`'s group that pushes `key`."""
        g = next(i for i, grp in enumerate(self.groups) if worker in grp)
        return self.owners[key][g]

    def pushers(self, key: int) -> tuple[int, ...]:
        """The workers that push `key` to its server (one per group)."""
        return self.owners[key]

    def bytes_pushed(self, elem_bytes: int = 4) -> dict[int, int]:
        """Bytes each worker pushes to the servers per iteration (it pulls as many back)."""
        out = {w: 0 for g in self.groups for w in g}
        for k, n in enumerate(self.numel):
            for w in self.owners[k]:
                out[w] += n * elem_bytes
        return out

    def describe(self) -> dict:
        """Plan facts recorded with the cell."""
        return {
            "ps_groups": [list(g) for g in self.groups],
            "ps_local_reduce": any(len(g) > 1 for g in self.groups),
            "ps_push_bytes_per_worker": list(self.bytes_pushed().values()),
        }
