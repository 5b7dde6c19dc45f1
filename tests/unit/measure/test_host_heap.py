"""A CPU rank's heap kept between iterations (harness/measure/host_heap.py): what a user would notice is the
page faults an iteration no longer takes. Counted (getrusage), not timed: a fault count does not depend on
the machine's load. Each case runs in a process of its own, since mallopt changes the process for good."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from helpers import ROOT

LOOP = """
import json, resource, sys, torch
from harness.measure import host_heap
how = host_heap.keep() if sys.argv[1] == "keep" else "untouched"
for _ in range(10):  # warm-up: the heap settles (three to five allocations here)
    x = torch.ones(16 * 2**20)  # 64 MB, above glibc's largest mmap threshold (32 MB)
    del x
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(10):  # what an iteration does with a vocabulary-sized gradient
    x = torch.ones(16 * 2**20)
    del x
print(json.dumps({"how": how, "faults": resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before}))
"""


def _faults(mode: str, **env) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", LOOP, mode],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
        cwd=ROOT,
        env={**os.environ, "OMP_NUM_THREADS": "1", **env},
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_a_kept_heap_reuses_a_large_tensor_instead_of_faulting_it_in_again():
    untouched, kept = _faults("plain"), _faults("keep")
    assert kept["how"] == "kept"
    pages = 10 * 64 * 2**20 // os.sysconf("SC_PAGE_SIZE")  # 10 fresh mappings of 64 MB, page by page
    print(
        f"\nminor faults over 10 allocations of 64 MB: default {untouched['faults']}, kept {kept['faults']} "
        f"({pages} pages allocated)"
    )
    assert kept["faults"] < 0.05 * pages and kept["faults"] < untouched["faults"]


def test_the_variable_leaves_the_allocator_as_it_started():
    r = _faults("keep", DDLBENCH_HOST_HEAP="default")
    assert r["how"] == "default"
