"""The host heap of a CPU rank kept between iterations (docs/ARCHITECTURE.md, "Timing loop": "The host heap").

glibc's malloc serves every allocation above its mmap threshold (32 MB at most) with a fresh mmap and returns
it with munmap when freed, and trims the heap's top as it shrinks. A CPU training iteration frees and
allocates the same large tensors every iteration (bert-base-tiny: four 62.5 MB vocabulary-sized gradient and
optimizer tensors), so each iteration maps them afresh and the kernel zero-fills them page by page: measured
on this project's 2-core box (glibc 2.36, bert-base-tiny fp32, one thread), 61,000-68,000 minor page faults
and 277-315 ms per iteration by default; with the heap kept, 0-510 faults and 183-204 ms (about 30% less).
The faults are the kernel's work, not the model's: a CPU cell measures them as compute, at a rate that moves
by 10-15% from one process to the next.

`keep()` turns both off for the process (mallopt: M_MMAP_MAX 0, so large blocks come from the heap; a trim
threshold of 2 GiB, the most mallopt takes, so freed ones stay there for the next iteration): what CPU-training guides
get by preloading tcmalloc or jemalloc, without a library to install. The cost is resident memory: the heap keeps
its peak (bert-base-tiny: 843-887 MB against 674-689 MB). It runs in the rank after any fork (mallopt
changes the calling process's allocator at any time; the heap settles within its first few allocations of
a size, inside the warm-up: the quick sweep's first measured iterations show no step), so warm ranks forked from the
zygote get it as cold ones do. On a CPU the bare loop (harness/doctor/timing/bare_loop.py), the profiler
(harness/predict/profiler.py) and commbench's ranks call it too. GPU cells keep the allocator as it started: their
large tensors are in device memory (PyTorch's caching allocator), and their host side is not changed under a
framework's own memory hooks (UCX's).

DDLBENCH_HOST_HEAP=default leaves the allocator alone (to measure a CPU cell as glibc's defaults run it, or
under a preloaded allocator of the user's own); the summary's `host_heap` column says which applied.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os

M_TRIM_THRESHOLD = -1
M_MMAP_MAX = -4
TRIM_THRESHOLD = 2**31 - 1
"""Bytes a freed heap top may reach before glibc returns it (mallopt takes an int: this is its largest)."""
HEAP_VAR = "DDLBENCH_HOST_HEAP"

KEPT = "kept"
DEFAULT = "default"


def keep() -> str:
    """Keep this process's heap between iterations where glibc allows it; `kept`, or `default` with the
    reason when it did not apply (the variable says so, or the C library is not glibc)."""
    if os.environ.get(HEAP_VAR, "").strip().lower() == DEFAULT:
        return DEFAULT
    libc = _glibc()
    if libc is None:
        return f"{DEFAULT} (not glibc)"
    if libc.mallopt(M_MMAP_MAX, 0) != 1 or libc.mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD) != 1:
        return f"{DEFAULT} (mallopt refused)"
    return KEPT


def _glibc():
    """This process's C library when it is glibc (it has gnu_get_libc_version), else None."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.gnu_get_libc_version  # noqa: B018 - musl and others lack it
    except (OSError, AttributeError):
        return None
    libc.mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    libc.mallopt.restype = ctypes.c_int
    return libc
