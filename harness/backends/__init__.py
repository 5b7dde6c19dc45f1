"""Backends: the transports schemes run on, one package each owning everything about it (transport,
server loop, what it provides, how every launcher starts it), registered by name (docs/ARCHITECTURE.md,
"Backend"). Registration order is the order schemes list the backends they run on: torch first."""

from harness.backends import torch_dist  # noqa: F401  (each package registers itself; torch first)
from harness.backends import byteps, deepspeed, horovod  # noqa: F401
from harness.backends.base import BACKENDS, BackendEntry

__all__ = ["BACKENDS", "BackendEntry"]
