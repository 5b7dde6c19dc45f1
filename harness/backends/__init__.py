"""Backends: the transports schemes run on, one package each owning everything about it (transport,
server loop, what it provides, how every launcher starts it), each defining its `ENTRY`
(docs/ARCHITECTURE.md, "Backend").

`load()` is the one load of the backends (docs/ARCHITECTURE.md, "Plugins"): it registers every package's
ENTRY in the registry of harness/contracts/backend.py, in PLUGINS order (the order schemes list the
backends they run on: torch first). Importing a backend's module registers nothing; the layers above the
backends call `load()` before they ask (the rank's entry points, the one sweep path, the commands)."""

from harness.backends import byteps, deepspeed, horovod, torch_dist
from harness.contracts.backend import BACKENDS, BackendEntry, register
from harness.core.registry import Registry

PLUGINS = (torch_dist, byteps, deepspeed, horovod)
"""Every backend package, in registration order (torch first)."""


def load() -> Registry[BackendEntry]:
    """Register every backend (once; later calls return the same registry) and return the registry."""
    for package in PLUGINS:
        if package.ENTRY.name not in BACKENDS:
            register(package.ENTRY)
    return BACKENDS
