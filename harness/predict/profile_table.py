"""The tidy profile table (one row per parameter tensor): its columns and how it is built from the
counted costs and, when measured, the timings (harness.predict.profiler)."""

from __future__ import annotations

import pandas as pd

from harness.core.schema import SCHEMA_VERSION

PROFILE_COLUMNS = [
    "schema_version",
    "source",
    "workload",
    "sample_unit",
    "device",
    "threads",
    "batch",
    "seq_len",
    "iters",
    "concurrent",  # copies of the same training loop running at once while measuring (1 = alone)
    "dtype",  # compute dtype the times were measured in (fp32 with TF32 off, or bf16 autocast)
    "layer",
    "layer_index",
    "forward_order",
    "param_name",
    "param_index",
    "ready_order",
    "numel",
    "grad_bytes",
    "forward_s",  # the owning layer's forward time, shared equally by the layer's tensors
    "ready_s",  # gradient ready, seconds after the start of backward (median)
    "backward_s",  # ready_s minus the previous ready tensor's (merge_plan's input)
    "backward_total_s",  # whole backward (same on every row)
    "optimizer_s",  # optimizer step time, shared by tensor size
    "forward_flops",
    "backward_flops",
    "flops",  # per iteration (the whole batch)
    "forward_mem_bytes",
    "backward_mem_bytes",  # bytes read + written by the ops charged here
    "optimizer_mem_bytes",  # SGD with momentum: p, g, buf read; p, buf written
]

PROFILE_OPTIONAL = ("concurrent", "dtype")
"""Columns added after tables were first stored: absent = measured alone, in fp32 (TF32 left at torch's
default then, which changes nothing on CPU, where every stored profile was measured)."""

SGD_BYTES_PER_ELEMENT = 5  # x element size: read param, grad, momentum; write param, momentum


def build_table(
    spec,
    batch,
    seq_len,
    counts: dict,
    timing: dict | None,
    device: str,
    threads: int,
    iters: int,
    concurrent: int = 1,
    dtype: str = "fp32",
) -> pd.DataFrame:
    """The tidy profile table (PROFILE_COLUMNS), one row per parameter tensor in parameter order."""
    params, own = counts["params"], counts["owners"]
    layer_of = {}
    for j, (_, _, mine) in enumerate(own):
        for i in mine:
            layer_of[i] = j
    if timing is not None:
        ready = timing["ready_s"]
        order = sorted(range(len(params)), key=lambda i: (ready[i], i))
        fwd_order = timing["forward_order"]
    else:
        order = counts["ready_seq"]
        fwd_order = counts["forward_order"]
    ready_rank = {i: r for r, i in enumerate(order)}
    prev_ready = {}
    prev = 0.0
    for i in order:
        if timing is not None:
            prev_ready[i] = max(0.0, timing["ready_s"][i] - prev)
            prev = timing["ready_s"][i]
    total_numel = sum(p.numel() for p in params) or 1
    nan = float("nan")
    rows = []
    for i, p in enumerate(params):
        j = layer_of[i]
        share = len(own[j][2])
        elem = p.element_size()
        rows.append(
            {
                "schema_version": SCHEMA_VERSION,
                "source": "measured" if timing else "counted",
                "workload": spec.name,
                "sample_unit": spec.sample_unit,
                "device": device,
                "threads": threads,
                "batch": batch,
                "seq_len": seq_len,
                "iters": iters if timing else 0,
                "concurrent": concurrent if timing else 0,
                "dtype": dtype,
                "layer": own[j][0],
                "layer_index": j,
                "forward_order": fwd_order[j],
                "param_name": counts["names"][i],
                "param_index": i,
                "ready_order": ready_rank[i],
                "numel": p.numel(),
                "grad_bytes": p.numel() * elem,
                "forward_s": timing["layer_forward_s"][j] / share if timing else nan,
                "ready_s": timing["ready_s"][i] if timing else nan,
                "backward_s": prev_ready[i] if timing else nan,
                "backward_total_s": timing["backward_total_s"] if timing else nan,
                "optimizer_s": timing["optimizer_s"] * p.numel() / total_numel if timing else nan,
                "forward_flops": counts["fwd_flops"][j] / share,
                "backward_flops": counts["bwd_flops"][i],
                "flops": counts["fwd_flops"][j] / share + counts["bwd_flops"][i],
                "forward_mem_bytes": counts["fwd_bytes"][j] / share,
                "backward_mem_bytes": counts["bwd_bytes"][i],
                "optimizer_mem_bytes": SGD_BYTES_PER_ELEMENT * p.numel() * elem,
            }
        )
    return pd.DataFrame(rows, columns=PROFILE_COLUMNS)
