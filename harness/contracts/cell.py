"""One benchmark cell: every axis value and knob that defines a measurement, as a plain frozen dataclass with
no torch and no registry behind it (docs/ARCHITECTURE.md, "Data path"); `resolve` (harness/experiment/cells.py)
fills and checks it against the registries."""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import asdict, dataclass, field, replace

from harness.core.errors import UserError
from harness.networks.profiles import BUILTIN, profile_vars


@dataclass(frozen=True, kw_only=True)
class CellSettings:
    """The settings of a cell that a sweep file sets once for all of its cells and `ddlbench run` takes as
    options: declared here only; SweepConfig (harness/experiment/sweep.py) inherits them and the `run` options
    (harness/cli/options.py) are made from them (names, types, defaults, these docstrings)."""

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
    precision: float | None = None
    """Stop rule: measure in blocks until the 95% CI of the median iteration (slowest rank) is within +-this
    fraction of it: 0.02 or "2%"; none = exactly `iters` iterations, as always (README, "Measuring")."""
    min_iters: int | None = None
    """With precision: fewest measured iterations (default: iters)."""
    max_iters: int | None = None
    """With precision: most measured iterations (default: 10 x min-iters)."""
    max_time_s: float | None = None
    """With precision: no new block after this many seconds of measuring (default: 300, at most half the
    cell's timeout)."""


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
    """Parameter-server processes of a PS scheme's cell (none for the others); 0 = the default, one per worker
    node (`per_worker_node`), as the study ran BytePS (docs/ARCHITECTURE.md, "Server placement")."""
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
    def from_json(cls, text: str) -> CellSpec:
        return cls(**json.loads(text))

    @property
    def cell_id(self) -> str:
        """Stable, readable id: the same spec always maps to the same id (resume relies on it)."""
        key = {k: v for k, v in asdict(self).items() if k not in ("timeout_s", "trace_iters", "network_env")}
        for name in ("server_hosts", "dist_backend"):  # defaults: ids of cells from before the field stay
            if key[name] == "auto":
                del key[name]
        if key["precision"] is None:  # a fixed cell's id stays what it was before the stop rule
            for name in STOP_RULE:
                del key[name]
        digest = hashlib.sha1(json.dumps(key, sort_keys=True).encode()).hexdigest()[:8]
        ps = f".s{self.servers}" if self.servers else ""
        low = f".{self.dtype}" if self.dtype != "fp32" else ""  # fp32 ids stay as they were
        name = self.workload.replace(":", ".")  # a Python-path workload (pkg.mod:build): no ':' in paths
        return f"{name}.{self.scheme}.{self.backend}.w{self.workers}{ps}{low}.{digest}"

    def with_(self, **changes) -> CellSpec:
        return replace(self, **changes)

    def network_vars(self, nodes: int | None = None) -> dict[str, str]:
        """The variables every rank gets from the cell's network, its ranks spanning `nodes` hosts (default
        the cell's). A cell made without `resolve` (tests) gets the built-in profile's, or none."""
        env = self.network_env
        if env is None:
            env = BUILTIN[self.network].env() if self.network in BUILTIN else {}
        return profile_vars(self.network, env, self.nodes if nodes is None else nodes)


def per_worker_node(servers: int, nodes: int) -> int:
    """The parameter-server processes of a PS cell whose workers span `nodes` hosts: `servers` when given, else
    (0) one per worker node, the study's layout and BytePS's advice (one server per worker machine). The one
    default of `--servers` in every command and of a sweep file's `servers:` (README, "Parameter servers"). Pure."""
    return servers or nodes


STOP_RULE = ("precision", "min_iters", "max_iters", "max_time_s")
"""The settings of a cell's stop rule (README, "Measuring"); all absent from a fixed cell's id."""
DEFAULT_MAX_TIME_S = 300.0
"""Seconds of measuring after which a precision cell starts no new block, unless --max-time says otherwise."""


def parse_precision(value, where: str = "--precision") -> float:
    """A precision target as a fraction in (0, 1]: a number (0.02) or a string, "0.02" or "2%"; anything
    else (0, negative, over 100%, not a number, a list) is a UserError in one line. Pure."""
    text = value.strip() if isinstance(value, str) else value
    if isinstance(value, bool) or not isinstance(text, (int, float, str)):
        raise UserError(f"{where} {value!r} is not a precision: give one fraction like 0.02 or a percentage like 2%")
    try:
        p = float(text[:-1]) / 100 if isinstance(text, str) and text.endswith("%") else float(text)
    except ValueError:
        raise UserError(
            f"{where} {value!r} is not a number: write a fraction like 0.02 or a percentage like 2%"
        ) from None
    if not math.isfinite(p) or p <= 0 or p > 1:
        raise UserError(
            f"{where} {value!r} is outside (0, 100%]: the median's 95% CI must be within +-P of it, "
            f"P > 0; write e.g. 0.02 or 2%"
        )
    return p


def check_stop_rule(cell: CellSettings) -> None:
    """Refuse a stop rule that cannot run, in one line (UserError): bounds without a precision, bounds below
    1 or crossed, a time limit that is not below the cell's timeout. Pure."""
    if cell.precision is None:
        given = [name for name in STOP_RULE[1:] if getattr(cell, name) is not None]
        if given:
            raise UserError(
                f"{given[0]} bounds the stop rule of --precision; give --precision P too, or drop it "
                f"(without a precision a cell runs exactly `iters` iterations)"
            )
        return
    parse_precision(cell.precision)
    for name in ("min_iters", "max_iters"):
        v = getattr(cell, name)
        if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v < 1):
            raise UserError(f"{name} must be an integer >= 1, got {v!r}; fix the option or sweep file")
    low, high, _ = stop_bounds(cell)
    if high < low:
        raise UserError(f"max_iters {high} is below min_iters {low}; raise --max-iters or lower --min-iters")
    t = cell.max_time_s
    if t is not None and (not isinstance(t, (int, float)) or not math.isfinite(t) or t <= 0 or t >= cell.timeout_s):
        raise UserError(
            f"max_time_s must be seconds > 0 and below the cell's timeout ({cell.timeout_s:g} s), got {t!r}; "
            f"lower --max-time or raise --timeout"
        )


def stop_bounds(cell: CellSettings) -> tuple[int, int, float]:
    """(min iterations, max iterations, max seconds) of a precision cell's stop rule, defaults filled: min =
    the cell's `iters`, max = 10 x min, time = 300 s but at most half the cell's timeout (README, "Measuring"). Pure."""
    low = cell.min_iters if cell.min_iters is not None else cell.iters
    high = cell.max_iters if cell.max_iters is not None else 10 * low
    t = cell.max_time_s if cell.max_time_s is not None else min(DEFAULT_MAX_TIME_S, cell.timeout_s / 2)
    return low, high, float(t)


DIST_BACKENDS = ("auto", "nccl", "gloo")
"""What a cell may ask of torch.distributed: auto (NCCL for CUDA tensors, gloo for CPU ones), nccl, gloo (the
device rule that applies them: harness/contracts/devices.py)."""
SERVER_HOSTS = ("auto", "dedicated", "colocated")
"""Placements of parameter servers (docs/ARCHITECTURE.md, "Server placement")."""


def server_placement(cell: CellSpec, spare_hosts: int, where: str = "this box") -> str:
    """What `cell.server_hosts` resolves to when `spare_hosts` hosts carry no worker: dedicated or
    colocated ("" for a cell without servers); UserError when dedicated is asked and none is spare. Pure."""
    if not cell.servers:
        return ""
    if cell.server_hosts == "dedicated" and spare_hosts < 1:
        raise UserError(
            f"--server-hosts dedicated needs a host without workers, and {where} has none spare; "
            f"give the testbed/allocation another host, or use --server-hosts colocated/auto"
        )
    if cell.server_hosts == "colocated":
        return "colocated"
    return "dedicated" if spare_hosts > 0 else "colocated"
