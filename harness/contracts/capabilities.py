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

This module holds the words; which backends provide what is asked of the backends' registry
(harness/contracts/backend.py: `providers`), so the schemes ask it without importing a backend.
"""

from __future__ import annotations

WORDS = (
    "allreduce",
    "push_pull",
    "reduce_scatter",
    "all_gather",
    "process_group",
    "horovod_engine",
    "deepspeed_engine",
    "byteps_engine",
)


def check_words(words, who: str) -> frozenset:
    unknown = sorted(set(words) - set(WORDS))
    if unknown:
        raise ValueError(
            f"{who}: unknown capabilities {unknown}; known: {', '.join(WORDS)} (harness/contracts/capabilities.py)"
        )
    return frozenset(words)
