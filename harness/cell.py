"""One benchmark cell: every axis value and knob that defines a measurement (docs/ARCHITECTURE.md, "Data path")."""

from __future__ import annotations

import hashlib
import json
import math
import os
import sys
from dataclasses import asdict, dataclass, field, replace

import torch

from harness.backends import BACKENDS
from harness.devices import check_dist_backend
from harness.errors import UserError
from harness.networks import BUILTIN, profile_vars, resolve_network
from harness.schemes import SCHEMES
from harness.training import DTYPES
from workloads import WORKLOADS


@dataclass(frozen=True, kw_only=True)
class CellSettings:
    """The settings of a cell that a sweep file sets once for all of its cells and `ddlbench run` takes as
    options: declared here only; SweepConfig (harness/sweep.py) inherits them and the `run` options
    (harness/commands/cell_options.py) are made from them (names, types, defaults, these docstrings)."""

    batch: int | None = None
    """Per-worker batch (samples); None = the workload's default. Weak scaling: fixed per worker."""
    seq_len: int | None = None
    """Sequence length (tokens) for text workloads; None = the workload's default."""
    warmup: int = 10
    """Iterations run and discarded before measuring."""
    iters: int = 30
    """Measured iterations."""
    timeout_s: float = 600.0
    """Wall-clock limit for the whole cell (start-up included); a hung rank fails the cell after it."""
    device: str = "auto"
    """cpu | cuda | auto (cuda when available)."""
    dist_backend: str = "auto"
    """torch.distributed backend of the workers' collectives: auto (NCCL for CUDA tensors, gloo for CPU
    ones), nccl, or gloo (on CUDA only on purpose: host copies, but several ranks may share one GPU). The
    row's `dist_backend` records what the group really used (docs/ARCHITECTURE.md, "Devices")."""
    threads: int = 1
    """torch intra-op threads per worker on CPU (one core per worker)."""
    network: str = "loopback"
    """Network profile (loopback, auto, eth, ipoib, ib-rdma, a site's or a sweep's) or declared label
    (emulated-500mbit, a sweep's `labels:`), recorded in the row (docs/ARCHITECTURE.md, "Networks")."""


@dataclass(frozen=True, kw_only=True)
class CellSpec(CellSettings):
    """One measurement: its axis values and knobs, and the settings above."""

    workload: str
    """Registered workload name, e.g. `bert-base-tiny`."""
    scheme: str
    """Registered scheme name, e.g. `wfbp-a2a`; `local` is the 1-worker, no-communication baseline."""
    backend: str = "torch"
    """Transport the scheme runs on."""
    workers: int = 1
    """Worker processes (one per GPU; on CPU one per core)."""
    servers: int = 0
    """Parameter-server processes (PS schemes only; 0 = one for a -ps scheme)."""
    nodes: int = 1
    """Hosts the workers span (1 on a single box; Slurm/testbed set more)."""
    dtype: str = "fp32"
    """Compute dtype: fp32 (the study's) or bf16 (autocast, fp32 master parameters; docs/ARCHITECTURE.md,
    "Precision")."""
    network_rate_mbit: float | None = None
    """Link rate when known (emulated testbed), Mbit/s."""
    network_env: dict | None = None
    """The variables of the resolved profile (`resolve` sets them; {} for a label); launchers apply them
    (`network_vars`) and never look the name up again. Not part of the cell id: it follows from `network`."""
    knobs: dict = field(default_factory=dict)
    """Scheme/backend knobs (e.g. bucket_cap_mb), resolved against the scheme's defaults."""
    seed: int = 0
    """Seed for model init (identical on every rank) and data (seed + 1000 + rank)."""
    trace_iters: int = 0
    """Measured iterations to record as a timeline (trace.json; docs/ARCHITECTURE.md, "Traces"); 0 = off.
    Not part of the cell id: a traced cell measures the same thing."""
    server_hosts: str = "auto"
    """Where parameter servers run (PS schemes): dedicated (hosts no worker uses), colocated (the workers'
    hosts) or auto (dedicated when the testbed/allocation has hosts beyond the workers', else colocated);
    the row records what it resolved to (docs/ARCHITECTURE.md, "Server placement")."""

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> "CellSpec":
        return cls(**json.loads(text))

    @property
    def cell_id(self) -> str:
        """Stable, readable id: the same spec always maps to the same id (resume relies on it)."""
        key = {k: v for k, v in asdict(self).items() if k not in ("timeout_s", "trace_iters", "network_env")}
        for name in ("server_hosts", "dist_backend"):  # defaults: ids of cells from before the field stay
            if key[name] == "auto":
                del key[name]
        digest = hashlib.sha1(json.dumps(key, sort_keys=True).encode()).hexdigest()[:8]
        ps = f".s{self.servers}" if self.servers else ""
        low = f".{self.dtype}" if self.dtype != "fp32" else ""  # fp32 ids stay as they were
        name = self.workload.replace(":", ".")  # a Python-path workload (pkg.mod:build): no ':' in paths
        return f"{name}.{self.scheme}.{self.backend}.w{self.workers}{ps}{low}.{digest}"

    def with_(self, **changes) -> "CellSpec":
        return replace(self, **changes)

    def network_vars(self, nodes: int | None = None) -> dict[str, str]:
        """The variables every rank gets from the cell's network, its ranks spanning `nodes` hosts (default
        the cell's). A cell made without `resolve` (tests) gets the built-in profile's, or none."""
        env = self.network_env
        if env is None:
            env = BUILTIN[self.network].env() if self.network in BUILTIN else {}
        return profile_vars(self.network, env, self.nodes if nodes is None else nodes)


def resolve(cell: CellSpec, networks: dict | None = None, labels: tuple = ()) -> CellSpec:
    """Fill defaults from the registries and check every name and number; raises UserError. The network
    is resolved once (harness/networks.py: `networks`, a sweep's profiles; `labels`, its declared labels)
    and kept in `network_env`; a cell resolved already keeps its own."""
    wl = WORKLOADS.get(cell.workload)
    scheme = SCHEMES.get(cell.scheme)
    unusable = BACKENDS.get(cell.backend).available()
    if unusable:  # never a silent fallback to another backend
        raise UserError(unusable)
    if cell.backend not in scheme.backends:
        raise UserError(
            f"scheme {cell.scheme!r} does not run on backend {cell.backend!r}: it runs on "
            f"{', '.join(scheme.backends)}; pick one of those with --backend"
        )
    for name, value, low in (("workers", cell.workers, 1), ("iters", cell.iters, 1),
                             ("warmup", cell.warmup, 0), ("threads", cell.threads, 1),
                             ("nodes", cell.nodes, 1), ("servers", cell.servers, 0),
                             ("trace_iters", cell.trace_iters, 0)):
        if not isinstance(value, int) or value < low:
            raise UserError(f"{name} must be an integer >= {low}, got {value!r}; fix the option or sweep file")
    if not isinstance(cell.timeout_s, (int, float)) or not math.isfinite(cell.timeout_s) or cell.timeout_s <= 0:
        raise UserError(f"timeout must be a finite number of seconds > 0, got {cell.timeout_s!r} (a cell "
                        f"without a limit could hang forever); fix --timeout or timeout_s")
    batch, seq = check_shape(wl, cell.batch, cell.seq_len)
    if not isinstance(cell.network, str) or not cell.network.strip():
        raise UserError(f"network label {cell.network!r} is empty: give the network a name for the rows "
                        f"(e.g. loopback, eth-10g)")
    network_env = cell.network_env
    if network_env is None or networks or labels:
        network_env = resolve_network(cell.network, networks, tuple(labels)).env()
    device = resolve_device(cell.device, cell.workers, cell.nodes, cell.dist_backend)
    check_dist_backend(cell.dist_backend, device)
    check_dtype(cell.dtype, scheme, device)
    servers = cell.servers
    if scheme.parameter_server and servers == 0:
        servers = 1
    if not scheme.parameter_server and servers:
        raise UserError(f"scheme {cell.scheme!r} has no parameter servers; drop servers={servers} "
                        f"or pick a -ps scheme")
    check_server_hosts(cell.server_hosts, cell.scheme, scheme.parameter_server)
    if not isinstance(cell.knobs, dict):
        raise UserError(f"knobs must map knob names to values, got {cell.knobs!r}; write e.g. "
                        f"--knob bucket_cap_mb=25 or knobs: {{ddp: {{bucket_cap_mb: 25}}}}")
    knobs = scheme.resolve_knobs(cell.knobs)
    check_knob_values(cell.scheme, knobs)
    return replace(cell, batch=batch, seq_len=seq, device=device, servers=servers, knobs=knobs,
                   network_env=network_env)


SERVER_HOSTS = ("auto", "dedicated", "colocated")
"""Placements of parameter servers (docs/ARCHITECTURE.md, "Server placement")."""


def check_server_hosts(value: str, scheme: str, parameter_server: bool) -> None:
    if value not in SERVER_HOSTS:
        raise UserError(f"server hosts {value!r} is not one of {', '.join(SERVER_HOSTS)}; fix --server-hosts "
                        f"or `server_hosts:` in the sweep file")
    if value != "auto" and not parameter_server:
        raise UserError(f"scheme {scheme!r} has no parameter servers, so --server-hosts {value} means nothing; "
                        f"drop it or pick a -ps scheme")


def server_placement(cell: CellSpec, spare_hosts: int, where: str = "this box") -> str:
    """What `cell.server_hosts` resolves to when `spare_hosts` hosts carry no worker: dedicated or
    colocated ("" for a cell without servers); UserError when dedicated is asked and none is spare. Pure."""
    if not cell.servers:
        return ""
    if cell.server_hosts == "dedicated" and spare_hosts < 1:
        raise UserError(f"--server-hosts dedicated needs a host without workers, and {where} has none spare; "
                        f"give the testbed/allocation another host, or use --server-hosts colocated/auto")
    if cell.server_hosts == "colocated":
        return "colocated"
    return "dedicated" if spare_hosts > 0 else "colocated"


def check_dtype(dtype: str, scheme, device: str) -> None:
    """The compute dtype against what the scheme (a SchemeEntry) and the device run (docs/ARCHITECTURE.md,
    "Precision"); UserError otherwise."""
    if dtype not in DTYPES:
        raise UserError(f"unknown dtype {dtype!r}: use {' or '.join(DTYPES)} (fp16 would need loss scaling, "
                        f"which no method here reproduces); fix --dtype or `dtype:` in the sweep file")
    if dtype not in scheme.dtypes:
        raise UserError(f"scheme {scheme.name!r} cannot run {dtype}: it runs {', '.join(scheme.dtypes)}; "
                        f"use --dtype {scheme.dtypes[0]} or pick another scheme")
    if dtype == "bf16" and device == "cuda" and not torch.cuda.is_bf16_supported():
        raise UserError("bf16 needs a GPU with bfloat16 support (Ampere or newer) and this one has none; "
                        "use --dtype fp32 or --device cpu")


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
        raise UserError(f"sequence length must be an integer from 1 to {most or 'the model maximum'} for "
                        f"{wl.name!r} (its position table), got {seq!r}; fix --seq-len")
    return batch, seq


def check_knob_values(scheme: str, knobs: dict) -> None:
    """Numeric knobs are sizes, times or switches: finite and >= 0 (a negative bucket or credit would
    reach the scheme as nonsense, NaN would never compare)."""
    for name, value in knobs.items():
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            if not math.isfinite(value) or value < 0:
                raise UserError(f"knob {name}={value!r} of scheme {scheme!r} must be a finite number >= 0; "
                                f"fix it in --knob or the sweep file")


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
        raise UserError(f"{cell.workers} workers x {cell.threads} thread(s) need {need} cores but this box has "
                        f"{cores}: one worker runs per core; lower --workers, or {opt_in}")
    if cell.servers > SHARE_LIMIT * cores:  # servers mostly wait, so they may share the workers' cores
        raise UserError(f"{cell.servers} parameter servers on a box of {cores} cores: lower --servers, or {opt_in}")
    if need + cell.servers > cores:
        return (f"{cell.workers} workers x {cell.threads} thread(s) + {cell.servers} server(s) share {cores} "
                f"cores: ranks wait for each other's time slices, so throughput is the box's, not the method's")
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
