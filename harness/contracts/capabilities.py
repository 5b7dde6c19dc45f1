"""What each backend provides and what each scheme needs (docs/ARCHITECTURE.md, "Backend" and "Scheme"): a
scheme runs on every backend that provides all it needs, so a new backend appears under every scheme it can
carry without any scheme naming it, and a new scheme on every backend that can carry it.

The words (a backend declares the ones it has, `BackendEntry.provides`; a scheme the ones it uses,
`register(..., needs=...)`):

    allreduce         Transport.allreduce_async: an in-place sum of a named tensor over the workers
    push_pull         Transport.push_pull_async through parameter servers (and their server loop)
    reduce_scatter    Transport.reduce_scatter_async
    all_gather        Transport.all_gather_async
    process_group     a torch.distributed process group that framework wrappers take (DDP, FSDP2)
    horovod_engine    Horovod's own DistributedOptimizer (tensor fusion, its cycle)
    deepspeed_engine  DeepSpeed's engine (ZeRO stages)
    byteps_engine     BytePS's own DistributedOptimizer and server scheduling

The backends are this registry's plugins, imported by name on first use (as the recipes are), so the
schemes ask it without importing a backend. Backends are listed in registration order (torch first).
"""

from __future__ import annotations

import importlib

WORDS = ("allreduce", "push_pull", "reduce_scatter", "all_gather", "process_group", "horovod_engine",
         "deepspeed_engine", "byteps_engine")
PLUGINS = "harness.backends"
"""The package whose import registers every backend."""

_PROVIDES: dict[str, frozenset] = {}


def check_words(words, who: str) -> frozenset:
    unknown = sorted(set(words) - set(WORDS))
    if unknown:
        raise ValueError(f"{who}: unknown capabilities {unknown}; known: {', '.join(WORDS)} "
                         f"(harness/contracts/capabilities.py)")
    return frozenset(words)


def register(backend: str, provides) -> None:
    if backend in _PROVIDES:
        raise ValueError(f"backend {backend!r} registered its capabilities twice")
    _PROVIDES[backend] = check_words(provides, f"backend {backend!r}")


def _known() -> dict[str, frozenset]:
    if not _PROVIDES:
        importlib.import_module(PLUGINS)
    return _PROVIDES


def providers(needs: frozenset) -> tuple[str, ...]:
    """The backends that provide everything in `needs`, in registration order; a scheme that needs nothing
    (it communicates nothing) runs on the first backend only: there is nothing to choose between."""
    known = _known()
    if not needs:
        return tuple(known)[:1]
    return tuple(name for name, has in known.items() if needs <= has)
