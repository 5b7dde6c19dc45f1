"""Sweep files: YAML mapped onto a frozen dataclass (unknown keys refused), expanded into cells.

    name: quick
    workloads: [bert-base-tiny, resnet50-tiny]
    schemes: [ddp, bsp-a2a, wfbp-a2a]
    workers: [1, 2]
    warmup: 3
    iters: 10
    knobs: {ddp: {bucket_cap_mb: [1, 25]}}     # lists expand into the matrix

Every sweep also measures, per workload, the 1-worker no-communication baseline (`local`), from which
speed-up and scaling efficiency are computed.
"""

from __future__ import annotations

import dataclasses
import itertools
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from harness import backends
from harness.contracts.cell import CellSettings, CellSpec, parse_precision
from harness.contracts.training import DTYPES
from harness.core.config import Kind, checked, load_document, unknown_keys
from harness.core.errors import UserError
from harness.experiment.cells import resolve
from harness.gate.baselines import check_name
from harness.schemes import SCHEMES


@dataclass(frozen=True)
class SweepConfig(CellSettings):
    """A sweep file: the settings every cell shares (CellSettings: batch, seq_len, warmup, iters,
    timeout_s, device, threads, network; declared there once), the axes, and what the sweep itself does."""

    name: str = "sweep"
    """Run name; the run id is <UTC time>-<name>."""
    workloads: tuple = ("bert-base-tiny",)
    """Workload names."""
    schemes: tuple = ("ddp",)
    """Scheme names."""
    backends: tuple = ("torch",)
    """Backends; a scheme runs on each listed backend it supports."""
    workers: tuple = (1, 2)
    """Worker counts (weak scaling: per-worker batch fixed)."""
    servers: tuple = ()
    """Parameter-server counts, for -ps schemes only (each >= 1); none given: one per worker node, as
    `--servers` (harness/contracts/cell.per_worker_node)."""
    server_hosts: tuple = ("auto",)
    """Where parameter servers run, for -ps schemes only: auto | dedicated | colocated (a list expands
    into the matrix; docs/ARCHITECTURE.md, "Server placement")."""
    dtype: tuple = ("fp32",)
    """Compute dtypes, fp32 and/or bf16 (a list expands into the matrix; a scheme runs each it supports,
    each dtype gets its own baseline; docs/ARCHITECTURE.md, "Precision")."""
    labels: tuple = ()
    """Free network labels `network:` may name: recorded in the rows, they set no interface (a name that
    is neither a profile nor declared here is refused as a misspelt profile)."""
    knobs: dict = field(default_factory=dict)
    """scheme -> {knob: value or list of values}; lists expand into the matrix."""
    baseline: bool = True
    """Measure the 1-worker `local` baseline of each workload (needed for scaling efficiency)."""
    testbed: dict | None = None
    """Run on the emulated multi-host testbed: {hosts: N, rate: 500mbit} (see `ddlbench testbed`)."""
    networks: dict | None = None
    """Named network profiles (name -> {rate: ..}) on the testbed; each cell runs on each profile."""
    oversubscribe: bool = False
    """Allow more workers x threads than this box has cores (correctness runs; timings are then noise)."""
    cold: bool = False
    """Start every cell's ranks as fresh interpreters, as before warm ranks (docs/ARCHITECTURE.md, "Warm
    ranks"): for comparison; the numbers are the same, start-up costs seconds more per cell."""
    trace: int = 0
    """Measured iterations of each cell to record as a timeline (trace.json; docs/ARCHITECTURE.md,
    "Traces"); 0 = off. Cell ids stay the same."""


_LISTS = ("workloads", "schemes", "backends", "workers", "servers", "server_hosts", "dtype", "labels")
# key -> (accepted types, what to write): every scalar is checked here, so a wrong type is a one-line
# error naming the key, not a traceback later. The cell settings' come from their declarations.


def _setting_types() -> dict[str, tuple[tuple, str]]:
    """(accepted types, what to write) of each CellSettings field, from its annotation."""
    out = {}
    for name, hint in typing.get_type_hints(CellSettings).items():
        kinds = typing.get_args(hint) if typing.get_origin(hint) in (typing.Union, types.UnionType) else (hint,)
        if float in kinds:
            kinds += (int,)
        main = next(k for k in kinds if k is not type(None))
        number = "a number" + (" of seconds" if name.endswith("_s") else "")
        what = {int: "an integer", str: "a name"}.get(main, number)
        out[name] = (tuple(kinds), what)
    return out


_TYPES = {
    **_setting_types(),
    "name": ((str,), "a name"),
    "knobs": ((dict,), "a mapping scheme -> {knob: value}"),
    "baseline": ((bool,), "true or false"),
    "oversubscribe": ((bool,), "true or false"),
    "cold": ((bool,), "true or false"),
    "trace": ((int,), "a number of iterations to trace (0 = off)"),
    "testbed": ((dict, type(None)), "a mapping {hosts: N, rate: R}"),
    "networks": ((dict, type(None)), "a mapping name -> {rate: R}"),
}
_ITEM_TYPES = {
    "workloads": (str, "names"),
    "schemes": (str, "names"),
    "backends": (str, "names"),
    "workers": (int, "integers >= 1"),
    "servers": (int, "integers >= 1 (parameter-server processes; omit `servers:` for one per worker node)"),
    "server_hosts": (str, "auto, dedicated or colocated"),
    "dtype": (str, "fp32 and/or bf16"),
    "labels": (str, "network labels"),
}


_LEAST = {"servers": 1}
"""Lower bounds of list items checked when the file is read (the others' when its cells are resolved)."""
UNREADABLE = "cannot read sweep file {path}: {error}; check its permissions and that it is a text (YAML) file"
SWEEP = Kind(
    "yaml",
    {
        "missing": "sweep file {path} does not exist or is not a file; give the path of a YAML sweep file",
        "unreadable": UNREADABLE,
        "undecodable": UNREADABLE,
        "syntax": "sweep file {path} is not valid YAML{at}: fix its syntax",
        "empty": "sweep file {path} is empty: give at least `workloads:` (see sweeps/quick.yaml)",
        "mapping": "{source} must be a mapping of settings (name:, workloads:, ...), not {type}",
        "unknown": "unknown key(s) {unknown} in {source}: known keys are {known}",
        "knobs": "`knobs: {{{scheme}: {value!r}}}` in {source} must map each scheme to {{knob: value}}, e.g. "
        "knobs: {{ddp: {{bucket_cap_mb: [1, 25]}}}}",
        "list_empty": "`{key}:` in {source} is empty: give at least one value, e.g. {key}: [{example}]",
        "item": "`{key}:` in {source} must hold {what}, got {value!r}; fix the sweep file",
        "scalar": "`{key}: {value!r}` in {source} must be {what}; fix the sweep file",
    },
)
"""A sweep file: YAML, each problem's line (harness/core/config.py: one loader, one error style)."""


def load_sweep(path: str | Path) -> SweepConfig:
    p = Path(path)
    return sweep_from_dict(load_document(p, SWEEP), source=str(p))


def sweep_from_dict(data, source: str = "sweep") -> SweepConfig:
    if not isinstance(data, dict):
        SWEEP.fail("mapping", source=source, type=type(data).__name__)
    unknown_keys(data, (f.name for f in dataclasses.fields(SweepConfig)), SWEEP, source=source)
    clean = {k: _checked(k, v, source) for k, v in data.items()}
    for scheme, knobs in clean.get("knobs", {}).items():
        if not isinstance(knobs, dict):
            SWEEP.fail("knobs", scheme=scheme, value=knobs, source=source)
    if "name" in clean:
        check_name(clean["name"], "sweep name")
    return SweepConfig(**clean)


def _checked(key: str, value, source: str):
    """One sweep-file value, type-checked; list keys become tuples (a scalar is a list of one)."""
    if key in _LISTS:
        items = tuple(value) if isinstance(value, (list, tuple)) else (value,)
        kind, what = _ITEM_TYPES[key]
        if not items:
            SWEEP.fail("list_empty", key=key, source=source, example=_EXAMPLES[key])
        for v in items:
            checked(v, (kind,), SWEEP, "item", low=_LEAST.get(key), key=key, source=source, what=what)
        return items
    if key == "precision":  # one target per sweep: not an axis
        if isinstance(value, (list, tuple, dict)):
            raise UserError(
                f"`precision: {value!r}` in {source} is not an axis: give one target, e.g. precision: 2%, "
                f"and run a sweep per target"
            )
        return None if value is None else parse_precision(value, f"`precision:` in {source}")
    kinds, what = _TYPES[key]
    return checked(value, kinds, SWEEP, "scalar", key=key, source=source, what=what)


_EXAMPLES = {
    "workloads": "resnet50-tiny",
    "schemes": "ddp",
    "backends": "torch",
    "workers": "1, 2",
    "servers": "1",
    "server_hosts": "auto",
    "dtype": "fp32, bf16",
    "labels": "eth-10g",
}


def knob_value(text: str, option: str = "--knob"):
    """A knob value written on the command line, read as YAML like the sweep file (25, 0.5, true,
    [1, 2]); a YAML error or tag is a UserError."""
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as e:
        why = str(getattr(e, "problem", None) or "not valid YAML").strip()
        raise UserError(
            f"{option} value {text!r} cannot be read ({why}); write a plain number, word or "
            f"list, e.g. 25, true or [1, 2]"
        ) from None


def _knob_grid(knobs: dict) -> list[dict]:
    names = sorted(knobs)
    values = [v if isinstance(v, list) else [v] for v in (knobs[n] for n in names)]
    return [dict(zip(names, combo)) for combo in itertools.product(*values)] or [{}]


def _check_sweep(cfg: SweepConfig) -> None:
    """Refuse the sweep's workers, schemes and dtypes that cannot make a cell."""
    for w in cfg.workers:
        if not isinstance(w, int) or w < 1:
            raise UserError(f"workers must be integers >= 1, got {w!r}; fix `workers:` in the sweep file")
    for scheme in cfg.schemes:  # a scheme that would be skipped silently is a mistake in the file
        runs_on = SCHEMES.get(scheme).backends
        if not set(runs_on) & set(cfg.backends):
            raise UserError(
                f"scheme {scheme!r} runs on none of the sweep's backends ({', '.join(cfg.backends)}): "
                f"it runs on {', '.join(runs_on)}; add one of those to `backends:` or drop the scheme"
            )
    for dtype in cfg.dtype:
        if dtype not in DTYPES:
            raise UserError(f"unknown dtype {dtype!r} in `dtype:`: use {' and/or '.join(DTYPES)}; fix the sweep file")
    for scheme in cfg.schemes:
        if not set(SCHEMES.get(scheme).dtypes) & set(cfg.dtype):
            raise UserError(
                f"scheme {scheme!r} runs none of the sweep's dtypes ({', '.join(cfg.dtype)}): it runs "
                f"{', '.join(SCHEMES.get(scheme).dtypes)}; add one to `dtype:` or drop the scheme"
            )


def _scheme_cells(
    cfg: SweepConfig, wl: str, scheme: str, dtype: str, common: dict, networks: dict, nodes_for
) -> list[CellSpec]:
    """The cells of one scheme for one workload and dtype: every backend it runs on, worker count, knob
    combination and server layout."""
    entry = SCHEMES.get(scheme)
    if dtype not in entry.dtypes:
        return []
    ps = entry.parameter_server
    layouts = list(itertools.product(cfg.servers or (0,) if ps else (0,), cfg.server_hosts if ps else ("auto",)))
    cells: list[CellSpec] = []
    for backend in cfg.backends:
        if backend not in entry.backends:
            continue
        for workers in cfg.workers:
            for knobs in _knob_grid(cfg.knobs.get(scheme, {})):
                for servers, where in layouts:
                    nodes = nodes_for(workers) if nodes_for else 1
                    cells.append(
                        resolve(
                            CellSpec(
                                workload=wl,
                                scheme=scheme,
                                backend=backend,
                                workers=workers,
                                servers=servers,
                                knobs=knobs,
                                nodes=nodes,
                                server_hosts=where,
                                **common,
                            ),
                            **networks,
                        )
                    )
    return cells


def expand(
    cfg: SweepConfig, network: str | None = None, rate_mbit: float | None = None, nodes_for=None, labels: tuple = ()
) -> list[CellSpec]:
    """All cells of the sweep, resolved (names checked, defaults filled), baseline cells first. `labels`:
    network labels declared beyond the file's `labels:` (the testbed's emulated-<rate>)."""
    networks = dict(networks=cfg.networks, labels=tuple(cfg.labels) + tuple(labels))
    backends.load()  # the schemes' backends are asked below (docs/ARCHITECTURE.md, "Plugins")
    for s in cfg.knobs:
        SCHEMES.get(s)
    common = {f.name: getattr(cfg, f.name) for f in dataclasses.fields(CellSettings)}  # what every cell shares
    common.update(timeout_s=float(cfg.timeout_s), network=network or cfg.network, network_rate_mbit=rate_mbit)
    common["trace_iters"] = cfg.trace  # not part of the cell id
    _check_sweep(cfg)
    cells: list[CellSpec] = []
    for wl, dtype in itertools.product(cfg.workloads, cfg.dtype):
        common["dtype"] = dtype
        if cfg.baseline:
            cells.append(resolve(CellSpec(workload=wl, scheme="local", workers=1, **common), **networks))
        for scheme in cfg.schemes:
            cells += _scheme_cells(cfg, wl, scheme, dtype, common, networks, nodes_for)
    seen, out = set(), []
    for c in cells:
        if c.cell_id not in seen:
            seen.add(c.cell_id)
            out.append(c)
    if not out:
        raise UserError(
            "the sweep expands to no cells: check that its schemes run on its backends (see `ddlbench list`)"
        )
    return out


def with_overrides(
    cfg: SweepConfig,
    trace: int | None = None,
    server_hosts: str | None = None,
    dtype: str | None = None,
    servers: int = 0,
    stop: dict | None = None,
) -> SweepConfig:
    """The command line's replacements of the file's `trace:` (docs/ARCHITECTURE.md, "Traces"),
    `server_hosts:`, `servers:`, `dtype:` (docs/ARCHITECTURE.md, "Precision") and the stop rule's settings
    (`stop`: {field: value} of --precision, --min-iters, --max-iters, --max-time given; README, "Measuring");
    None (0 for servers) keeps the file's."""
    if stop:
        cfg = dataclasses.replace(cfg, **stop)
    if trace is not None:
        cfg = dataclasses.replace(cfg, trace=trace)
    if server_hosts:
        cfg = dataclasses.replace(cfg, server_hosts=(server_hosts,))
    if dtype:
        cfg = dataclasses.replace(cfg, dtype=(dtype,))
    if servers:
        cfg = dataclasses.replace(cfg, servers=(servers,))
    return cfg
