"""Backends: the transports schemes run on (DESIGN section 2). One file per backend, registered by name."""

from harness.backends.base import BACKENDS, BackendEntry, Handle, Transport  # noqa: F401
from harness.backends import torch_dist  # noqa: F401,E402  (registers `torch`)
from harness.backends import horovod, deepspeed, byteps  # noqa: F401,E402  (register; frameworks import lazily)
