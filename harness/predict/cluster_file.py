"""A user's own cluster as a TOML file, predicted through the same door as a registered one
(harness/predict/clusters.py; docs/ARCHITECTURE.md, "Predictor"): its nodes, the links between and inside them,
and each method's framework (a software stack: harness/sim/costs.Stack's costs by name) and knobs.

    ddlbench predict --workload bert-base --device-preset study-gpu --cluster examples/cluster-25g.toml

    label = "lab-25g"                       # the rows' network label (default: the file's name)
    gpus_per_node = 8
    max_nodes = 64                          # optional: the largest node count it is predicted at
    [links]
    inter = "eth-25g"                       # a link preset (`ddlbench predict --help`), or a table:
    intra = { rate_gbit_s = 1200.0, latency_s = 1e-6, source = "NVLink 2.0, V100 datasheet" }
    [stacks.horovod]                        # a framework's costs beyond the wire (Stack fields, seconds, bytes)
    launch_s = 10e-6
    negotiation_s = 50e-6
    [methods.mgwfbp]                        # a method's framework (default: ddlbench's own) and knobs
    stack = "horovod"
    knobs = { alpha_s = 1e-4 }

Every key is checked: an unknown one, a missing one or a bad value is a one-line error naming the file and the
key. Such a file states no input ranges: its rows carry no interval. With `predict --calibrate RUN`, the methods the
file gives no framework run on ddlbench's own stacks as the runs calibrated them (harness/predict/own_calibration.py).
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import tomllib

from harness.core.errors import UserError
from harness.predict.clusters import ClusterEntry
from harness.predict.own_calibration import OwnCalibration, calibrate_stacks
from harness.predict.predictor import Network, method_knobs, predict_rows
from harness.sim.costs import Stack
from harness.sim.links import LINKS, Link

TOP_KEYS = {"label", "gpus_per_node", "max_nodes", "servers", "server_hosts", "allreduce", "links", "stacks", "methods"}
MAX_NODES = 4096
"""The largest node count a file without `max_nodes` is predicted at (the simulation's own limit is memory)."""
CHOICES = {"server_hosts": ("dedicated", "colocated"), "allreduce": ("ring", "hierarchical")}
"""The placement keys with a fixed set of values (as `ddlbench predict --server-hosts`, `--allreduce`)."""
LINK_KEYS = {"rate_gbit_s", "latency_s", "per_message_s", "source"}
STACK_FIELDS = {
    f.name: f.type for f in dataclasses.fields(Stack) if f.type in ("float", "bool") and f.name != "comm_scale"
}
"""The stack costs a file may set: every plain number or switch of `Stack` (not `comm_scale`, which the
interference pass sets, nor the callables and nested costs a wing's stack carries)."""


def is_cluster_file(name: str) -> bool:
    """Whether `--cluster NAME` names a file (a path ending in .toml) rather than a registered cluster."""
    return name.endswith(".toml")


# complex by design (C901): one check per key of the file, each its own one-line error
def read_cluster_file(path: str | Path) -> ClusterEntry:  # noqa: C901
    """The cluster the file describes, as the predictor asks it; a UserError naming the file and key otherwise."""
    path = Path(path)
    if not path.is_file():
        raise UserError(f"cluster file {path} does not exist: write one (examples/cluster-25g.toml shows every key)")
    try:
        doc = tomllib.loads(path.read_text())
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise UserError(f"cluster file {path} is not TOML ({e}): fix its syntax") from None
    where = f"cluster file {path}"
    _known(doc, TOP_KEYS, where)
    label = doc.get("label", path.stem)
    if not isinstance(label, str) or not label.strip():
        raise UserError(f"{where}: label must be a non-empty string, got {label!r}")
    g = _int(doc.get("gpus_per_node"), f"{where}: gpus_per_node")
    max_nodes = _int(doc.get("max_nodes", MAX_NODES), f"{where}: max_nodes")
    servers = 0 if doc.get("servers", 0) == 0 else _int(doc["servers"], f"{where}: servers")
    choice = {k: doc.get(k, v[0]) for k, v in CHOICES.items()}
    for key, value in choice.items():
        if value not in CHOICES[key]:
            raise UserError(f"{where}: {key} must be one of {', '.join(CHOICES[key])}, got {value!r}")
    links = _table(doc, "links", where)
    _known(links, {"inter", "intra"}, f"{where}: [links]")
    if set(links) != {"inter", "intra"}:
        raise UserError(
            f"{where}: [links] needs inter and intra (each a preset name or a table of {', '.join(sorted(LINK_KEYS))})"
        )
    inter, intra = (_link(links[k], f"{where}: links.{k}") for k in ("inter", "intra"))
    stacks = {name: _stack(body, f"{where}: stacks.{name}") for name, body in _table(doc, "stacks", where).items()}
    method_stacks, file_knobs = _methods(_table(doc, "methods", where), stacks, where)
    network = Network(label, inter, intra, stacks=method_stacks or None)

    def check_nodes(nodes: int) -> None:
        if nodes > max_nodes:
            raise UserError(f"--nodes {nodes}: {where} is modelled up to max_nodes = {max_nodes}")

    def curve(models, node_counts, methods, knobs, calibration: OwnCalibration | None = None):
        net = network
        if calibration is not None:  # the methods the file gives no framework run on ddlbench's own stacks, calibrated
            net = dataclasses.replace(network, stacks={**calibration.stacks(), **(method_stacks or {})})
            knobs = calibration.calibrated_knobs(methods, knobs)
        merged = {m: {**file_knobs.get(m, {}), **(knobs or {}).get(m, {})} for m in {*file_knobs, *(knobs or {})}}
        return predict_rows(
            models,
            [net],
            list(node_counts),
            g,
            methods,
            servers,
            choice["allreduce"],
            merged,
            server_hosts=choice["server_hosts"],
        )

    return ClusterEntry(
        summary=f"{label}: nodes of {g} GPUs on {inter.name} ({path})",
        gpus_per_node=g,
        check_nodes=check_nodes,
        curve=curve,
        calibrate=calibrate_stacks,
    )


def _methods(methods: dict, stacks: dict, where: str) -> tuple[dict, dict]:
    """The file's [methods.NAME] tables: each method's stack (one of [stacks]) and its knobs, checked as `--knob`
    checks them (harness/predict/predictor.method_knobs)."""
    method_stacks, file_knobs = {}, {}
    for method, body in methods.items():
        at = f"{where}: methods.{method}"
        if not isinstance(body, dict):
            raise UserError(f"{at} must be a table (stack = NAME, knobs = {{...}})")
        _known(body, {"stack", "knobs"}, at)
        if "stack" in body:
            if body["stack"] not in stacks:
                raise UserError(
                    f"{at}: stack {body['stack']!r} is not defined: add [stacks.{body['stack']}] or "
                    f"pick one of {', '.join(stacks) or 'none defined'}"
                )
            method_stacks[method] = stacks[body["stack"]]
        knobs = body.get("knobs", {})
        if not isinstance(knobs, dict):
            raise UserError(f"{at}: knobs must be a table, e.g. knobs = {{ bucket_cap_mb = 50 }}")
        try:
            method_knobs(method, knobs)
        except UserError as e:
            raise UserError(f"{at}: {e}") from None
        file_knobs[method] = dict(knobs)
    return method_stacks, file_knobs


def _known(table: dict, keys: set, where: str) -> None:
    unknown = sorted(set(table) - keys)
    if unknown:
        raise UserError(f"{where}: unknown key {', '.join(unknown)} (known: {', '.join(sorted(keys))})")


def _table(doc: dict, key: str, where: str) -> dict:
    value = doc.get(key, {})
    if not isinstance(value, dict):
        raise UserError(f"{where}: [{key}] must be a table")
    return value


def _int(value, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise UserError(f"{what} must be an integer >= 1, got {value!r}")
    return value


def _number(value, what: str, low: float = 0.0) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < low:
        raise UserError(f"{what} must be a finite number >= {low:g}, got {value!r}")
    return float(value)


def _link(value, where: str) -> Link:
    if isinstance(value, str):
        if value not in LINKS:
            raise UserError(
                f"{where}: unknown link preset {value!r}: known presets are {', '.join(sorted(LINKS))} "
                f"(or a table of {', '.join(sorted(LINK_KEYS))})"
            )
        return LINKS[value]
    if not isinstance(value, dict):
        raise UserError(f"{where} must be a link preset name or a table of {', '.join(sorted(LINK_KEYS))}")
    _known(value, LINK_KEYS, where)
    if "rate_gbit_s" not in value or "latency_s" not in value:
        raise UserError(f"{where} needs rate_gbit_s and latency_s")
    rate = _number(value["rate_gbit_s"], f"{where}.rate_gbit_s")
    if rate == 0:
        raise UserError(f"{where}.rate_gbit_s must be > 0")
    return Link(
        where.rsplit(" ", 1)[-1],
        rate,
        _number(value["latency_s"], f"{where}.latency_s"),
        str(value.get("source", "")),
        per_message_s=_number(value.get("per_message_s", 0.0), f"{where}.per_message_s"),
    )


def _stack(body, where: str) -> Stack:
    if not isinstance(body, dict):
        raise UserError(f"{where} must be a table of stack costs ({', '.join(sorted(STACK_FIELDS))})")
    _known(body, set(STACK_FIELDS), where)
    out = {}
    for key, value in body.items():
        if STACK_FIELDS[key] == "bool":
            if not isinstance(value, bool):
                raise UserError(f"{where}.{key} must be true or false, got {value!r}")
            out[key] = value
        else:
            out[key] = _number(value, f"{where}.{key}")
    return Stack(**out)
