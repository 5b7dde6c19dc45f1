"""Cells resolved against the registries (docs/ARCHITECTURE.md, "Data path"): defaults filled from the
workload, scheme and backend, every name and number checked, the network profile resolved; the checks a run
makes before anything starts (capacity, device)."""

from __future__ import annotations

import math
import os
import sys
from dataclasses import replace

import torch

from harness import backends
from harness.contracts.cell import SERVER_HOSTS, CellSpec, check_stop_rule, per_worker_node
from harness.contracts.devices import check_dist_backend
from harness.contracts.training import DTYPES
from harness.core.errors import UserError
from harness.networks.profiles import resolve_network
from harness.schemes import SCHEMES
from workloads import WORKLOADS


def resolve(cell: CellSpec, networks: dict | None = None, labels: tuple = ()) -> CellSpec:
    """Fill defaults from the registries and check every name and number; raises UserError. The network
    is resolved once (harness/networks/profiles.py: `networks`, a sweep's profiles; `labels`, its declared labels)
    and kept in `network_env`; a cell resolved already keeps its own."""
    wl = WORKLOADS.get(cell.workload)
    scheme = SCHEMES.get(cell.scheme)
    unusable = backends.load().get(cell.backend).available()
    if unusable:  # never a silent fallback to another backend
        raise UserError(unusable)
    if cell.backend not in scheme.backends:
        raise UserError(
            f"scheme {cell.scheme!r} does not run on backend {cell.backend!r}: it runs on "
            f"{', '.join(scheme.backends)}; pick one of those with --backend"
        )
    for name, value, low in (
        ("workers", cell.workers, 1),
        ("iters", cell.iters, 1),
        ("warmup", cell.warmup, 0),
        ("threads", cell.threads, 1),
        ("nodes", cell.nodes, 1),
        ("servers", cell.servers, 0),
        ("trace_iters", cell.trace_iters, 0),
    ):
        if not isinstance(value, int) or value < low:
            raise UserError(f"{name} must be an integer >= {low}, got {value!r}; fix the option or sweep file")
    if not isinstance(cell.timeout_s, (int, float)) or not math.isfinite(cell.timeout_s) or cell.timeout_s <= 0:
        raise UserError(
            f"timeout must be a finite number of seconds > 0, got {cell.timeout_s!r} (a cell "
            f"without a limit could hang forever); fix --timeout or timeout_s"
        )
    check_stop_rule(cell)
    batch, seq = check_shape(wl, cell.batch, cell.seq_len)
    if not isinstance(cell.network, str) or not cell.network.strip():
        raise UserError(
            f"network label {cell.network!r} is empty: give the network a name for the rows (e.g. loopback, eth-10g)"
        )
    network_env = cell.network_env
    if network_env is None or networks or labels:
        network_env = resolve_network(cell.network, networks, tuple(labels)).env()
    device = resolve_device(cell.device, cell.workers, cell.nodes, cell.dist_backend)
    check_dist_backend(cell.dist_backend, device)
    check_dtype(cell.dtype, scheme, device)
    servers = per_worker_node(cell.servers, cell.nodes) if scheme.parameter_server else cell.servers
    if not scheme.parameter_server and servers:
        raise UserError(f"scheme {cell.scheme!r} has no parameter servers; drop servers={servers} or pick a -ps scheme")
    check_server_hosts(cell.server_hosts, cell.scheme, scheme.parameter_server)
    if not isinstance(cell.knobs, dict):
        raise UserError(
            f"knobs must map knob names to values, got {cell.knobs!r}; write e.g. "
            f"--knob bucket_cap_mb=25 or knobs: {{ddp: {{bucket_cap_mb: 25}}}}"
        )
    knobs = scheme.resolve_knobs(cell.knobs)
    check_knob_values(cell.scheme, knobs)
    return replace(cell, batch=batch, seq_len=seq, device=device, servers=servers, knobs=knobs, network_env=network_env)


def check_server_hosts(value: str, scheme: str, parameter_server: bool) -> None:
    if value not in SERVER_HOSTS:
        raise UserError(
            f"server hosts {value!r} is not one of {', '.join(SERVER_HOSTS)}; fix --server-hosts "
            f"or `server_hosts:` in the sweep file"
        )
    if value != "auto" and not parameter_server:
        raise UserError(
            f"scheme {scheme!r} has no parameter servers, so --server-hosts {value} means nothing; "
            f"drop it or pick a -ps scheme"
        )


def check_dtype(dtype: str, scheme, device: str) -> None:
    """The compute dtype against what the scheme (a SchemeEntry) and the device run (docs/ARCHITECTURE.md,
    "Precision"); UserError otherwise."""
    if dtype not in DTYPES:
        raise UserError(
            f"unknown dtype {dtype!r}: use {' or '.join(DTYPES)} (fp16 would need loss scaling, "
            f"which no method here reproduces); fix --dtype or `dtype:` in the sweep file"
        )
    if dtype not in scheme.dtypes:
        raise UserError(
            f"scheme {scheme.name!r} cannot run {dtype}: it runs {', '.join(scheme.dtypes)}; "
            f"use --dtype {scheme.dtypes[0]} or pick another scheme"
        )
    if dtype == "bf16" and device == "cuda" and not torch.cuda.is_bf16_supported():
        raise UserError(
            "bf16 needs a GPU with bfloat16 support (Ampere or newer) and this one has none; "
            "use --dtype fp32 or --device cpu"
        )


def check_shape(wl, batch: int | None, seq_len: int | None) -> tuple[int, int | None]:
    """The per-worker batch and sequence length for workload `wl` (a WorkloadSpec), defaults filled;
    UserError for a batch < 1, a sequence length on an image model, or one outside the model's
    positions (BERT's and GPT-2's position tables: max_position_embeddings / n_positions)."""
    batch = wl.batch if batch is None else batch
    if not isinstance(batch, int) or isinstance(batch, bool) or batch < 1:
        raise UserError(f"batch must be an integer >= 1 per worker, got {batch!r}; fix --batch")
    if wl.seq_len is None:
        if seq_len is not None:
            raise UserError(f"workload {wl.name!r} takes images, not a sequence length; drop --seq-len")
        return batch, None
    seq = wl.seq_len if seq_len is None else seq_len
    most = wl.config.get("max_position_embeddings") or wl.config.get("n_positions")
    if not isinstance(seq, int) or isinstance(seq, bool) or seq < 1 or (most and seq > most):
        raise UserError(
            f"sequence length must be an integer from 1 to {most or 'the model maximum'} for "
            f"{wl.name!r} (its position table), got {seq!r}; fix --seq-len"
        )
    return batch, seq


def check_knob_values(scheme: str, knobs: dict) -> None:
    """Numeric knobs are sizes, times or switches: finite and >= 0 (a negative bucket or credit would
    reach the scheme as nonsense, NaN would never compare)."""
    for name, value in knobs.items():
        numeric = isinstance(value, (int, float)) and not isinstance(value, bool)
        if numeric and (not math.isfinite(value) or value < 0):
            raise UserError(
                f"knob {name}={value!r} of scheme {scheme!r} must be a finite number >= 0; "
                f"fix it in --knob or the sweep file"
            )


def warn(note: str | None) -> None:
    """One line on stderr that does not stop anything (None: nothing to say)."""
    if note:
        print(f"warning: {note}", file=sys.stderr, flush=True)


SHARE_LIMIT = 4
"""Ranks per core the harness runs without --oversubscribe (with a warning past one per core): enough for a
2-core box to try a 2 nodes x 2 workers layout with its servers, far from a typo's 100000 processes."""


def check_capacity(cell: CellSpec, oversubscribe: bool = False) -> str | None:
    """On CPU one worker runs per core (the placement rule, docs/ARCHITECTURE.md). Past one per core the
    cell still runs, with a warning returned (ranks then share cores, and throughput says so); past
    SHARE_LIMIT per core it is refused unless the user opts in (as mpirun's --oversubscribe). Only for
    one-node cells: other nodes' cores are not visible from here."""
    if oversubscribe or cell.device != "cpu" or cell.nodes != 1:
        return None
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    opt_in = "pass --oversubscribe (oversubscribe: true in a sweep file) to share cores"
    need = cell.workers * cell.threads
    if need > SHARE_LIMIT * cores:
        raise UserError(
            f"{cell.workers} workers x {cell.threads} thread(s) need {need} cores but this box has "
            f"{cores}: one worker runs per core; lower --workers, or {opt_in}"
        )
    if cell.servers > SHARE_LIMIT * cores:  # servers mostly wait, so they may share the workers' cores
        raise UserError(f"{cell.servers} parameter servers on a box of {cores} cores: lower --servers, or {opt_in}")
    if need + cell.servers > cores:
        return (
            f"{cell.workers} workers x {cell.threads} thread(s) + {cell.servers} server(s) share {cores} "
            f"cores: ranks wait for each other's time slices, so throughput is the box's, not the method's"
        )
    return None


def resolve_device(device: str, workers: int, nodes: int, dist_backend: str = "auto") -> str:
    """cpu or cuda for `device` (cpu | cuda | auto); UserError when CUDA is asked and absent, or when a node
    would carry more workers than GPUs (NCCL refuses two ranks of one communicator on one GPU; over gloo,
    asked for on purpose, ranks may share one)."""
    if device not in ("auto", "cpu", "cuda"):
        raise UserError(f"unknown device {device!r}: use cpu, cuda or auto")
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda":
        if not torch.cuda.is_available():
            raise UserError("device cuda was selected but CUDA is not available here; use --device cpu")
        per_node = -(-workers // nodes)
        have = torch.cuda.device_count()
        if per_node > have and dist_backend != "gloo":
            raise UserError(
                f"{per_node} workers per node need {per_node} GPUs but this node has {have}: one worker "
                f"runs per GPU over NCCL; lower --workers, add nodes, or share GPUs over gloo on purpose "
                f"(--dist-backend gloo)"
            )
    return device
