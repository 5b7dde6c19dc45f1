"""The `torch` backend's transport: torch.distributed (gloo on CPU, nccl for CUDA tensors) and a
parameter server.

Process layout: ranks 0..W-1 are workers, ranks W..W+S-1 parameter servers. All-reduce runs on the
workers' group; push-pull is point-to-point over gloo (servers hold CPU memory, as BytePS servers do),
a gradient partition travelling worker -> server (push) and the server's sum back (pull).
"""

from __future__ import annotations

import datetime
import socket
from typing import Any

import torch
import torch.distributed as dist

from harness.backends.interfaces import choose_interface
from harness.backends.torch_dist import ps, ps_server
from harness.backends.torch_dist.handles import WorkHandle
from harness.contracts.devices import process_group_backend, tensor_backend
from harness.contracts.transport import Handle, Transport


def rendezvous_store(me, timeout: datetime.timedelta) -> dist.TCPStore:
    """The job's rendezvous store. Rank 0 listens on the rendezvous address only (loopback on one box,
    the address of the network under test across hosts), not on every interface as TCPStore does when
    it opens the socket itself; an address that is not this host's falls back to TCPStore's own bind.
    (docs/ARCHITECTURE.md, "What listens where".)"""
    fd = None
    if me.rank == 0:
        try:
            infos = socket.getaddrinfo(me.master_addr, me.master_port, type=socket.SOCK_STREAM)
            sock = socket.socket(infos[0][0], socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(infos[0][4])
            sock.listen(1024)
            fd = sock.detach()
        except OSError:
            fd = None
    return dist.TCPStore(
        me.master_addr, me.master_port, me.world_size, is_master=me.rank == 0, timeout=timeout, master_listen_fd=fd
    )


def init_process_group(cell, me, device: torch.device) -> dict:
    """Join the job's process group on the interface of the network under test (interfaces.py); returns
    that choice for the rank's record. The backend follows the device's type (harness/contracts/devices.py): with
    CUDA, NCCL moves CUDA tensors and gloo CPU ones (PS traffic); gloo alone when the cell asks for it."""
    facts = choose_interface(me)
    backend = process_group_backend(device, cell.dist_backend)
    timeout = datetime.timedelta(seconds=max(30.0, float(cell.timeout_s)))
    dist.init_process_group(
        backend=backend, store=rendezvous_store(me, timeout), world_size=me.world_size, rank=me.rank, timeout=timeout
    )
    return facts


# The single-tensor collectives: torch >= 2.13 names them *_single (the *_tensor names still work but
# warn that they are deprecated); gloo and nccl both implement them (probed on torch 2.13 CPU/gloo).
_REDUCE_SCATTER = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
_ALL_GATHER = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor


class TorchTransport(Transport):
    def __init__(self, cell, me, device: torch.device):
        self.workers = cell.workers
        self.rank = me.rank
        self.device = device
        self._servers = cell.servers
        # Every rank (servers too) must take part in creating each group.
        self.group = dist.new_group(list(range(cell.workers))) if cell.servers else dist.group.WORLD
        self._ps: ps.PSClient | None = None
        if cell.servers:
            nodes = [None] * cell.workers  # which node each worker is on: its node group for the local reduce
            dist.all_gather_object(nodes, me.node_rank, group=self.group)
            local_reduce = bool((cell.knobs or {}).get("local_reduce", 1))
            self._ps = ps.PSClient(cell.workers, cell.servers, self.rank, nodes, local_reduce, device)
        # what the groups really use (dist.get_backend), recorded in the row and checked by the worker
        self.dist_backend = tensor_backend(dist.get_backend(self.group), device.type)
        self.facts.update(
            dist_backend=self.dist_backend,
            dist_groups={"workers": str(dist.get_backend(self.group)), "world": str(dist.get_backend())},
        )
        # only an NCCL operation finishes later than its wait() returns (handles.wait_done)
        self._poll = self.dist_backend == "nccl"

    @property
    def servers(self) -> int:
        return self._servers

    def allreduce_async(self, tensor, name, priority=0) -> Handle:
        return WorkHandle([dist.all_reduce(tensor, group=self.group, async_op=True)], poll=self._polls(tensor))

    def reduce_scatter_async(self, tensor, out, name, priority=0) -> Handle:
        work = _REDUCE_SCATTER(out, tensor, group=self.group, async_op=True)
        return WorkHandle([work], poll=self._polls(tensor))

    def all_gather_async(self, tensor, out, name, priority=0) -> Handle:
        work = _ALL_GATHER(out, tensor, group=self.group, async_op=True)
        return WorkHandle([work], poll=self._polls(tensor))

    def _polls(self, tensor) -> bool:
        """Whether completion of an operation on `tensor` must be asked (NCCL), not waited for: gloo's
        wait() blocks until it is done, and its CUDA works never report is_completed()."""
        return self._poll and tensor.is_cuda

    def declare_keys(self, keys):
        return self._ps.declare(keys)

    def push_pull_async(self, tensor, name, priority=0) -> Handle:
        return self._ps.push_pull(tensor, name)

    def describe(self) -> dict:
        return self._ps.describe() if self._ps is not None else {}

    def barrier(self) -> None:
        dist.barrier(group=self.group)

    def broadcast_object(self, obj: Any, src: int = 0) -> Any:
        box = [obj]
        dist.broadcast_object_list(box, src=src, group=self.group)
        return box[0]

    def gather_object(self, obj: Any, dst: int = 0):
        out = [None] * self.workers if self.rank == dst else None
        dist.gather_object(obj, out, dst=dst, group=self.group)
        return out

    def allreduce_min_(self, tensor) -> None:
        dist.all_reduce(tensor, op=dist.ReduceOp.MIN, group=self.group)

    def shutdown(self) -> None:
        if self._ps is not None:
            self._ps.stop()
        if dist.is_initialized():
            dist.destroy_process_group()


def start(cell, me, device):
    device = torch.device(device)
    facts = init_process_group(cell, me, device)
    transport = TorchTransport(cell, me, torch.device(device))
    transport.facts.update(facts)
    transport.facts.update(
        reduce_scatter=f"torch.distributed.{_REDUCE_SCATTER.__name__}",
        all_gather=f"torch.distributed.{_ALL_GATHER.__name__}",
    )
    return transport


def serve(cell, me):
    init_process_group(cell, me, torch.device("cpu"))
    if cell.servers:
        dist.new_group(list(range(cell.workers)))  # collective: mirrors the workers' group creation
    ps_server.serve(cell.workers, cell.servers, me.rank)
    dist.destroy_process_group()


def versions() -> dict:
    out = {"torch": torch.__version__, "cuda": torch.version.cuda or ""}
    try:
        out["nccl"] = ".".join(map(str, torch.cuda.nccl.version())) if torch.cuda.is_available() else ""
    except Exception:  # nccl not compiled in
        out["nccl"] = ""
    return out
