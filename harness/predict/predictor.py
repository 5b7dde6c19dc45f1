"""Predictions over a grid (workloads x networks x placements x methods) as summary-shaped rows with
source=predicted: the same columns as a measured summary (harness.core.schema.SUMMARY_COLUMNS), statistics
that a single prediction cannot have left NaN.

A method is a registered scheme; its simulation is the Model registered beside it
(`register(..., model=Model(...))`, harness.sim.model): the predictor keeps no registry of its own.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, replace

import pandas as pd

from harness import backends
from harness.core.errors import UserError
from harness.core.methods import SEVEN_METHODS
from harness.core.schema import SCHEMA_VERSION, SUMMARY_COLUMNS
from harness.schemes import SCHEMES, SchemeEntry
from harness.sim.costs import with_optimizer
from harness.sim.interference import contended
from harness.sim.links import Cluster, Link
from harness.sim.model import ComputeModel, Model, NoModel, Outcome


def modelled() -> dict[str, SchemeEntry]:
    """Every registered scheme that has a simulation model, the study's seven first (then by name)."""
    have = {name: e for name, e in SCHEMES.items() if isinstance(e.model, Model)}
    first = [n for n in ("local", *SEVEN_METHODS) if n in have]
    return {n: have[n] for n in first + [n for n in have if n not in first]}


def _entry(name: str) -> SchemeEntry:
    entry = SCHEMES.get(name)
    if not isinstance(entry.model, Model):
        why = entry.model.reason if isinstance(entry.model, NoModel) else "none is registered"
        raise UserError(
            f"scheme {name!r} cannot be predicted: it has no simulation model ({why}); "
            f"pick one of {', '.join(modelled())}"
        )
    return entry


def resolve_methods(spec: str | list[str]) -> list[str]:
    names = spec.split(",") if isinstance(spec, str) else list(spec)
    out: list[str] = []
    for name in (x.strip() for x in names):
        if name == "all":  # every method that communicates (add `local` for the baseline itself)
            out += [k for k in modelled() if k != "local"]
        elif name == "study":
            out += list(SEVEN_METHODS)
        elif name in SCHEMES:
            out.append(_entry(name).name)
        else:
            raise UserError(f"unknown method {name!r}: known are {', '.join(modelled())} (or all, study)")
    return list(dict.fromkeys(out))


def method_knobs(name: str, overrides: dict | None = None) -> dict:
    """The scheme's knobs (validated as a cell's are) and its model's own, overrides applied."""
    entry = _entry(name)
    extra = dict(entry.model.extra_knobs)
    given = dict(overrides or {})
    unknown = sorted(k for k in given if k not in entry.knobs and k not in extra)
    if unknown:
        known = ", ".join(list(entry.knobs) + list(extra)) or "none"
        raise UserError(f"unknown knob {', '.join(unknown)} for method {name!r}: its knobs are {known}")
    base = entry.resolve_knobs({k: v for k, v in given.items() if k in entry.knobs})
    for k in extra:
        if k in given:
            extra[k] = _number(name, k, given[k])
    return {**base, **extra}


def _number(method: str, name: str, value) -> float:
    try:
        out = float(value)
    except (TypeError, ValueError):
        raise UserError(f"knob {name}={value!r} of method {method!r} is not a number; fix --knob") from None
    if not out > 0:
        raise UserError(f"knob {name}={value!r} of method {method!r} must be > 0; fix --knob")
    return out


def simulate(name: str, c: ComputeModel, cluster: Cluster, knobs: dict | None = None, p2p: Link | None = None):
    """One method's iteration on one cluster (p2p: the link PS traffic uses, default cluster.inter), with the
    optimizer the cluster's stack runs (harness/sim/costs.with_optimizer) and, where the stack says they share a
    GPU, communication and compute slowing each other (harness/sim/interference.contended).
    The simulations are deterministic: the same arguments give the same outcome, kept (`_MEMO`) so that an
    interval's samples and a sensitivity corner re-simulate only what their inputs change; methods whose models
    run the same simulation (`Model.runs`) share one."""
    mk = method_knobs(name, knobs)
    model = _entry(name).model
    runs = model.runs(cluster, mk) if model.runs is not None else None  # another method's very simulation
    what = (name, json.dumps(mk, sort_keys=True, default=str)) if runs is None else runs
    key = (what, c, _cluster_key(cluster), p2p)
    hit = _MEMO.get(key)
    if hit is None:
        hit = contended(model.simulate, with_optimizer(c, cluster.stack), cluster, mk, p2p)
        if len(_MEMO) >= MEMO_SIZE:
            _MEMO.pop(next(iter(_MEMO)))
        _MEMO[key] = hit
    return replace(hit, plan=dict(hit.plan))


MEMO_SIZE = 4096
"""Outcomes kept by `simulate` (oldest dropped first)."""
_MEMO: dict = {}


def _cluster_key(cl: Cluster) -> tuple:
    """Everything of a cluster a simulation reads, hashable (its `measured` dict as sorted items)."""
    return (
        cl.nodes,
        cl.workers_per_node,
        cl.inter,
        cl.intra,
        cl.servers,
        cl.server_hosts,
        cl.allreduce,
        cl.host,
        tuple(sorted((cl.measured or {}).items())),
        cl.stack,
    )


@dataclass(frozen=True)
class Network:
    label: str
    """Network label written in the rows."""
    inter: Link
    """Between hosts."""
    intra: Link
    """Inside a host."""
    measured: dict | None = None
    """workers -> measured all-reduce AlphaBeta (commbench)."""
    p2p: Link | None = None
    """Point-to-point link for parameter-server traffic (commbench), else `inter`."""
    host: Link | None = None
    """Shared host path of GPUs that cannot talk peer to peer (Cluster.host); None = direct."""
    stacks: dict | None = None
    """method -> the software stack that runs it here (harness/sim/costs.Stack: the study's Horovod,
    ByteScheduler and BytePS costs); a method not named runs as ddlbench's own (nothing beyond the links)."""


def predict_rows(
    models: list[ComputeModel],
    networks: list[Network],
    nodes: list[int],
    workers_per_node: int | list[int],
    methods: list[str],
    servers: int = 0,
    allreduce: str = "ring",
    knobs: dict | None = None,
    run_id: str = "predicted",
    server_hosts: str = "dedicated",
) -> pd.DataFrame:
    """One summary-shaped row per (workload, network, nodes, workers per node, method).
    knobs: method -> {knob: value}. server_hosts: dedicated | colocated (see Cluster)."""
    per_node = [workers_per_node] if isinstance(workers_per_node, int) else list(workers_per_node)
    backends.load()  # a row names the first backend its method runs on (docs/ARCHITECTURE.md, "Plugins")
    rows = []
    for c in models:
        x1 = c.batch / c.iteration_s
        for net, n, g in ((net, n, g) for net in networks for n in nodes for g in per_node):
            cluster = Cluster(
                n,
                g,
                net.inter,
                net.intra,
                servers,
                server_hosts=server_hosts,
                allreduce=allreduce,
                measured=net.measured,
                host=net.host,
            )
            comm_only, done = {}, {}
            for name in methods:
                mk = (knobs or {}).get(name)
                ps = SCHEMES.get(name).parameter_server
                if ps not in comm_only:  # as the probe measures: everything synchronised once, no overlap
                    probe_name = "bsp-ps" if ps else "bsp-a2a"
                    pk = (knobs or {}).get("bsp-ps") if ps else None
                    probe = simulate(probe_name, c, _on(cluster, net, probe_name), pk, net.p2p)
                    comm_only[ps] = max(0.0, probe.iter_s - c.iteration_s)
                    done[probe_name] = pk, probe  # that method's own row, when it comes, is this simulation
                same = done.get(name)
                out = same[1] if same and same[0] == mk else simulate(name, c, _on(cluster, net, name), mk, net.p2p)
                rows.append(_row(run_id, c, net, cluster, name, out, x1, comm_only[ps], method_knobs(name, mk)))
    df = pd.DataFrame(rows)
    cols = SUMMARY_COLUMNS + [col for col in df.columns if col not in SUMMARY_COLUMNS]
    return df.reindex(columns=cols)


def _on(cluster: Cluster, net: Network, method: str) -> Cluster:
    """The cluster with the stack that runs `method` on this network (ddlbench's own when none is named)."""
    stack = (net.stacks or {}).get(method)
    return cluster if stack is None else cluster.with_(stack=stack)


def _row(
    run_id,
    c: ComputeModel,
    net: Network,
    cluster: Cluster,
    name: str,
    out: Outcome,
    x1: float,
    comm_only: float,
    knobs: dict,
) -> dict:
    method = SCHEMES.get(name)
    backend = method.backends[0]
    N = cluster.workers
    servers = cluster.n_servers if method.parameter_server else 0
    gb = c.batch * N
    x = gb / out.iter_s
    exposed = max(0.0, out.iter_s - c.iteration_s)
    comm_bytes = c.total_grad_bytes if (N > 1 or method.parameter_server) and name != "local" else 0
    flops_iter = c.flops_per_sample * gb
    nan = math.nan
    row = {col: nan for col in SUMMARY_COLUMNS}
    row.update(
        {
            "schema_version": SCHEMA_VERSION,
            "run_id": run_id,
            "source": "predicted",
            "status": "ok",
            "reason": "",
            "log_tail": "",
            "cell_id": f"{c.workload}.{name}.{backend}.w{N}"
            + (f".s{servers}" if servers else "")
            + f".{net.label}.n{cluster.nodes}",
            "workload": c.workload,
            "sample_unit": c.sample_unit,
            "scheme": name,
            "backend": backend,
            "workers": N,
            "nodes": cluster.nodes,
            "workers_per_node": cluster.workers_per_node,
            "servers": servers,
            "batch_per_worker": c.batch,
            "global_batch": gb,
            "seq_len": c.seq_len if c.seq_len else nan,
            "dtype": "fp32",
            "device": c.device,
            "network": net.label,
            "network_rate_mbit": net.inter.rate_gbit_s * 1000.0,
            "warmup": 0,
            "iters": 0,
            "knobs_json": json.dumps(knobs, sort_keys=True),
            "iter_s_median": out.iter_s,
            "iter_s_mean": out.iter_s,
            "samples": 0,
            "throughput_median": x,
            "throughput_mean": x,
            "baseline_throughput": x1,
            "speedup": x / x1,
            "scaling_efficiency": x / (N * x1),
            "forward_s": out.forward_s,
            "backward_s": out.backward_s,
            "comm_wait_s": out.comm_wait_s,
            "optimizer_s": out.optimizer_s,
            "compute_only_iter_s": c.iteration_s,
            "exposed_comm_s": exposed,
            "comm_only_s": comm_only,
            "overlap_ratio": min(1.0, max(0.0, 1 - exposed / comm_only)) if comm_only > 0 else nan,
            "straggler_rank": nan,
            "params": sum(c.numels),
            "grad_bytes": c.total_grad_bytes,
            "flops_per_sample": c.flops_per_sample,
            "comm_bytes_per_iter": comm_bytes,
            "intensity_flops_per_byte": flops_iter / comm_bytes if comm_bytes else nan,
            "wall_s": nan,
            "plan_json": json.dumps(out.plan, sort_keys=True, default=str),
        }
    )
    for k, v in knobs.items():
        row[f"knob_{k}"] = v
    return row
