"""Backends: the transports schemes run on, one package each owning everything about it (transport,
server loop, how every launcher starts it), registered by name (docs/ARCHITECTURE.md, "Backend")."""

from harness.backends import byteps, deepspeed, horovod, torch_dist  # noqa: E402  (each registers itself)
from harness.backends.base import BACKENDS, BackendEntry, Handle, Transport

__all__ = ["BACKENDS", "BackendEntry", "Handle", "Transport", "byteps", "deepspeed", "horovod", "torch_dist"]
