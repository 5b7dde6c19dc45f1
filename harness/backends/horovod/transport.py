"""The `horovod` backend's transport: the Transport over Horovod's named asynchronous collectives (gloo on CPU).

Every rank is started by `horovodrun` or srun (launch.py), as Horovod users start jobs; the
ranks learn who they are from HOROVOD_RANK/HOROVOD_SIZE (harness.launchers.identity). Sums are
`hvd.allreduce_async_(t, name, op=hvd.Sum)` completed by `hvd.synchronize` (reduce-scatter and
all-gather: `hvd.reducescatter_async`/`hvd.allgather_async`, their result copied into the caller's
buffer); Horovod's background thread fuses outstanding tensors under its fusion threshold and cycle time. Horovod has no
priorities: the scheme's issue order is the only order. Parameter servers: none (push-pull is refused at set-up).
"""

from __future__ import annotations

import functools
import os
import shutil
from typing import Any

import torch

from harness.contracts.transport import Handle, Transport
from harness.core.errors import UserError
from harness.procs.argv import launcher_exe

INSTALL = "bash scripts/install_frameworks.sh horovod"


class _HvdHandle(Handle):
    __slots__ = ("handle", "hvd", "into")

    def __init__(self, hvd, handle, into: torch.Tensor | None = None):
        self.hvd, self.handle, self.into = hvd, handle, into

    def wait(self) -> None:
        if self.handle is not None:
            result = self.hvd.synchronize(self.handle)
            self.handle = None
            if self.into is not None:  # reducescatter/allgather return a new tensor: land it in place
                self.into.copy_(result.view(-1))


class HorovodTransport(Transport):
    def __init__(self, cell, me, device: torch.device):
        import horovod.torch as hvd  # optional: only this backend needs Horovod

        self.hvd = hvd
        why = device_check(device.type)
        if why:
            raise UserError(why)
        if cell.dist_backend != "auto":
            raise UserError(
                f"backend horovod picks its own transport (NCCL for CUDA tensors when built with it, "
                f"else gloo or MPI); drop --dist-backend {cell.dist_backend}"
            )
        hvd.init()
        if hvd.size() != cell.workers:
            raise UserError(
                f"horovod reports {hvd.size()} ranks but the cell has {cell.workers} workers; "
                f"start it through ddlbench (horovodrun -np {cell.workers})"
            )
        self.rank = hvd.rank()
        self.workers = hvd.size()
        # Horovod's gloo takes HOROVOD_GLOO_IFACE (its launchers set it: launch.py, the cell's profile)
        iface = os.environ.get("HOROVOD_GLOO_IFACE", "")
        self.facts.update(iface=iface, iface_addr="", iface_source="HOROVOD_GLOO_IFACE" if iface else "hostname")
        self.device = device
        # which library moves this cell's tensors: NCCL for CUDA when Horovod was built with it, else its
        # CPU controller (gloo or MPI); checked by the worker like a process group's backend
        cpu_ops = "gloo" if hvd.gloo_enabled() else "mpi"
        self.facts["dist_backend"] = "horovod-" + ("nccl" if device.type == "cuda" and hvd.nccl_built() else cpu_ops)
        self._seq = {"bcast": 0, "gather": 0}  # per kind: kinds may run on different threads

    def allreduce_async(self, tensor, name, priority=0) -> Handle:
        # Horovod keys its negotiation and response cache by name: a name must keep its shape, so the
        # size is part of it (schemes reuse names such as "probe" for buffers of several sizes).
        h = self.hvd.allreduce_async_(tensor, name=f"{name}.{tensor.numel()}", op=self.hvd.Sum)
        return _HvdHandle(self.hvd, h)

    def reduce_scatter_async(self, tensor, out, name, priority=0) -> Handle:
        # hvd.reducescatter splits dimension 0 evenly (the caller pads to a multiple of the workers)
        h = self.hvd.reducescatter_async(tensor, name=f"{name}.rs.{tensor.numel()}", op=self.hvd.Sum)
        return _HvdHandle(self.hvd, h, into=out)

    def all_gather_async(self, tensor, out, name, priority=0) -> Handle:
        h = self.hvd.allgather_async(tensor, name=f"{name}.ag.{tensor.numel()}")
        return _HvdHandle(self.hvd, h, into=out)

    def push_pull_async(self, tensor, name, priority=0) -> Handle:
        raise UserError("backend horovod has no parameter servers: run -ps schemes on backend torch")

    def declare_keys(self, keys):
        raise UserError("backend horovod has no parameter servers: run -ps schemes on backend torch")

    def barrier(self) -> None:
        self.hvd.barrier()

    def broadcast_object(self, obj: Any, src: int = 0) -> Any:
        n = self._next("bcast")
        return self.hvd.broadcast_object(obj, root_rank=src, name=f"ddlbench.bcast.{n}")

    def gather_object(self, obj: Any, dst: int = 0):
        n = self._next("gather")
        everything = self.hvd.allgather_object(obj, name=f"ddlbench.gather.{n}")
        return list(everything) if self.rank == dst else None

    def allreduce_min_(self, tensor) -> None:
        # blocking, so never two at once: one stable name per size (Horovod's response cache keeps it)
        # Horovod reduces no uint8/bool tensors (schedulers agree on readiness masks): go through int32
        work = tensor if tensor.dtype in (torch.int32, torch.int64, torch.float32, torch.float64) else tensor.int()
        tensor.copy_(self.hvd.allreduce(work, name=f"ddlbench.min.{tensor.numel()}", op=self.hvd.Min))

    def _next(self, kind: str) -> int:
        self._seq[kind] += 1
        return self._seq[kind]

    def shutdown(self) -> None:
        self.hvd.shutdown()


def start(cell, me, device):
    return HorovodTransport(cell, me, torch.device(device))


@functools.lru_cache(maxsize=1)
def available() -> str | None:
    try:
        import horovod.torch  # noqa: F401  (optional: only this backend needs Horovod)
    except Exception as e:  # missing, or built against another torch (ImportError, OSError ...)
        why = str(e).splitlines()[0] if str(e) else type(e).__name__
        return f"backend horovod is not usable here (import horovod.torch: {why}); install it: {INSTALL}"
    if shutil.which(launcher_exe("horovodrun")) is None:
        return f"backend horovod: horovodrun is not on PATH; install it: {INSTALL}"
    return None


def device_check(device: str) -> str | None:
    """CUDA cells need a Horovod built with NCCL: without it every CUDA tensor would be copied to the host
    and reduced over gloo/MPI, which is not how Horovod users run on GPUs."""
    if device != "cuda" or available() is not None:
        return None
    import horovod.torch as hvd  # optional: only this backend needs Horovod

    if not hvd.nccl_built():
        return (
            "backend horovod was built without NCCL, so it cannot reduce CUDA tensors on the GPU; rebuild "
            f"it on this CUDA machine ({INSTALL}, which sets HOROVOD_GPU_OPERATIONS=NCCL) or use --device cpu"
        )
    return None


def versions() -> dict:
    import horovod  # optional: only this backend needs Horovod
    import horovod.torch as hvd

    built = [n for n in ("mpi", "gloo", "nccl") if getattr(hvd, f"{n}_built")()]
    return {"horovod": horovod.__version__, "horovod_built": " ".join(built), "torch": torch.__version__}
