"""The backend contract (docs/ARCHITECTURE.md, "Backend"): one BackendEntry per backend, registered by its
package: its transport (harness/contracts/transport.py), its server loop, what it provides and how the
launchers start it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable


from harness.contracts import capabilities, recipes
from harness.contracts.recipes import BackendLaunch
from harness.core.registry import Registry


@dataclass(frozen=True)
class BackendEntry:
    """Everything about one backend (docs/ARCHITECTURE.md, "Backend"): its transport, its server loop,
    and how the launchers start it (`launch`: one recipe per launcher, harness/contracts/recipes.py).
    Generic code asks these fields and the recipes, and never tests a backend's name."""

    name: str
    """Registered name: torch | horovod | deepspeed | byteps."""
    description: str
    """One line for `ddlbench list`."""
    start: Callable[..., Any]
    """(cell, dist_env, device) -> Transport (worker) ; servers are run by `serve`."""
    serve: Callable[..., None] | None = None
    """(cell, dist_env) -> None: the parameter-server loop, for backends that have one."""
    available: Callable[[], str | None] = lambda: None
    """Returns None when usable here, else a one-line reason with the fix."""
    device_check: Callable[[str], str | None] = lambda device: None
    """(device: cpu | cuda) -> None when this backend can run cells there, else a one-line reason (e.g.
    Horovod built without NCCL cannot reduce CUDA tensors on the GPU)."""
    provides: frozenset = frozenset()
    """What its transport or framework offers schemes (harness/contracts/capabilities.py): every scheme that
    needs no more runs on it."""
    library: str | None = None
    """The distribution whose installed version the environment table records in the column named after the
    backend, compared by the gate for this backend's cells (None: nothing beyond torch)."""
    versions: Callable[[], dict] = field(default=lambda: {})
    """Library versions, recorded in the environment table: {column: version}, the backend's own library
    under the backend's name (compared by the gate for its cells only), anything else beside it."""
    launch: BackendLaunch = field(default_factory=BackendLaunch)
    """How the launchers start it: the variables every rank needs, how its own launcher names ranks,
    and its recipe for each launcher that starts it differently from the default."""


BACKENDS: Registry[BackendEntry] = Registry("backend")


def register(entry: BackendEntry) -> BackendEntry:
    """Register a backend and its launch recipes (the one call a backend's package makes)."""
    recipes.register(entry.name, entry.launch)
    capabilities.register(entry.name, entry.provides)
    return BACKENDS.register(entry.name, entry)
