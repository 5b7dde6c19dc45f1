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
from pathlib import Path

from harness.core.config import Kind, checked, load_document, unknown_keys
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
NOT_TOML = "cluster file {path} is not TOML ({error}): fix its syntax"
CLUSTER = Kind(
    "toml",
    {
        "missing": "cluster file {path} does not exist: write one (examples/cluster-25g.toml shows every key)",
        "undecodable": NOT_TOML,
        "syntax": NOT_TOML,
        "unknown": "{where}: unknown key {unknown} (known: {known})",
        "label": "{where}: label must be a non-empty string, got {value!r}",
        "integer": "{what} must be an integer >= 1, got {value!r}",
        "choice": "{where}: {key} must be one of {choices}, got {value!r}",
        "table": "{where}: [{key}] must be a table",
        "links": "{where}: [links] needs inter and intra (each a preset name or a table of {link_keys})",
        "preset": "{where}: unknown link preset {value!r}: known presets are {presets} (or a table of {link_keys})",
        "link": "{where} must be a link preset name or a table of {link_keys}",
        "link_needs": "{where} needs rate_gbit_s and latency_s",
        "rate": "{where}.rate_gbit_s must be > 0",
        "number": "{what} must be a finite number >= {low:g}, got {value!r}",
        "switch": "{what} must be true or false, got {value!r}",
        "stack": "{where} must be a table of stack costs ({stack_fields})",
        "method": "{where} must be a table (stack = NAME, knobs = {{...}})",
        "method_stack": "{where}: stack {value!r} is not defined: add [stacks.{value}] or pick one of {stacks}",
        "knobs": "{where}: knobs must be a table, e.g. knobs = {{ bucket_cap_mb = 50 }}",
        "knob": "{where}: {error}",
        "nodes": "--nodes {nodes}: {where} is modelled up to max_nodes = {max_nodes}",
    },
)
"""A cluster file: TOML, each problem's line (harness/core/config.py: one loader, one error style)."""
LISTED = {"link_keys": ", ".join(sorted(LINK_KEYS)), "stack_fields": ", ".join(sorted(STACK_FIELDS))}


def is_cluster_file(name: str) -> bool:
    """Whether `--cluster NAME` names a file (a path ending in .toml) rather than a registered cluster."""
    return name.endswith(".toml")


def read_cluster_file(path: str | Path) -> ClusterEntry:
    """The cluster the file describes, as the predictor asks it; a UserError naming the file and key otherwise."""
    path = Path(path)
    doc = load_document(path, CLUSTER)
    where = f"cluster file {path}"
    unknown_keys(doc, TOP_KEYS, CLUSTER, where=where)
    label = doc.get("label", path.stem)
    if not isinstance(label, str) or not label.strip():
        CLUSTER.fail("label", where=where, value=label)
    g = _int(doc.get("gpus_per_node"), f"{where}: gpus_per_node")
    max_nodes = _int(doc.get("max_nodes", MAX_NODES), f"{where}: max_nodes")
    servers = 0 if doc.get("servers", 0) == 0 else _int(doc["servers"], f"{where}: servers")
    choice = {k: doc.get(k, v[0]) for k, v in CHOICES.items()}
    for key, value in choice.items():
        if value not in CHOICES[key]:
            CLUSTER.fail("choice", where=where, key=key, choices=", ".join(CHOICES[key]), value=value)
    links = _table(doc, "links", where)
    unknown_keys(links, {"inter", "intra"}, CLUSTER, where=f"{where}: [links]")
    if set(links) != {"inter", "intra"}:
        CLUSTER.fail("links", where=where, **LISTED)
    inter, intra = (_link(links[k], f"{where}: links.{k}") for k in ("inter", "intra"))
    stacks = {name: _stack(body, f"{where}: stacks.{name}") for name, body in _table(doc, "stacks", where).items()}
    method_stacks, file_knobs = _methods(_table(doc, "methods", where), stacks, where)
    network = Network(label, inter, intra, stacks=method_stacks or None)

    def check_nodes(nodes: int) -> None:
        if nodes > max_nodes:
            CLUSTER.fail("nodes", nodes=nodes, where=where, max_nodes=max_nodes)

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
            CLUSTER.fail("method", where=at)
        unknown_keys(body, {"stack", "knobs"}, CLUSTER, where=at)
        if "stack" in body:
            if body["stack"] not in stacks:
                CLUSTER.fail("method_stack", where=at, value=body["stack"], stacks=", ".join(stacks) or "none defined")
            method_stacks[method] = stacks[body["stack"]]
        knobs = body.get("knobs", {})
        if not isinstance(knobs, dict):
            CLUSTER.fail("knobs", where=at)
        try:
            method_knobs(method, knobs)
        except UserError as e:
            CLUSTER.fail("knob", where=at, error=e)
        file_knobs[method] = dict(knobs)
    return method_stacks, file_knobs


def _table(doc: dict, key: str, where: str) -> dict:
    value = doc.get(key, {})
    if not isinstance(value, dict):
        CLUSTER.fail("table", where=where, key=key)
    return value


def _int(value, what: str) -> int:
    return checked(value, (int,), CLUSTER, "integer", low=1, what=what)


def _number(value, what: str, low: float = 0.0) -> float:
    return float(checked(value, (int, float), CLUSTER, "number", low=low, finite=True, what=what))


def _link(value, where: str) -> Link:
    if isinstance(value, str):
        if value not in LINKS:
            CLUSTER.fail("preset", where=where, value=value, presets=", ".join(sorted(LINKS)), **LISTED)
        return LINKS[value]
    if not isinstance(value, dict):
        CLUSTER.fail("link", where=where, **LISTED)
    unknown_keys(value, LINK_KEYS, CLUSTER, where=where)
    if "rate_gbit_s" not in value or "latency_s" not in value:
        CLUSTER.fail("link_needs", where=where)
    rate = _number(value["rate_gbit_s"], f"{where}.rate_gbit_s")
    if rate == 0:
        CLUSTER.fail("rate", where=where)
    return Link(
        where.rsplit(" ", 1)[-1],
        rate,
        _number(value["latency_s"], f"{where}.latency_s"),
        str(value.get("source", "")),
        per_message_s=_number(value.get("per_message_s", 0.0), f"{where}.per_message_s"),
    )


def _stack(body, where: str) -> Stack:
    if not isinstance(body, dict):
        CLUSTER.fail("stack", where=where, **LISTED)
    unknown_keys(body, STACK_FIELDS, CLUSTER, where=where)
    out = {}
    for key, value in body.items():
        if STACK_FIELDS[key] == "bool":
            out[key] = checked(value, (bool,), CLUSTER, "switch", what=f"{where}.{key}")
        else:
            out[key] = _number(value, f"{where}.{key}")
    return Stack(**out)
