"""ddlbench's own stacks calibrated from a one-node run and a two-node run of the harness (docs/ARCHITECTURE.md,
"Calibration"): named physical parameters of the software that runs the methods here (torch.distributed over gloo
or NCCL, the harness's own schemes, DDP, the ByteScheduler engine, the parameter servers) and of the network
between nodes, fitted to the cells a user measures before asking about a larger cluster, then used to predict it.

    cal = calibrate_own(["one-node-run", "two-node-run"], profile_compute({...}))
    cal.table()                                  # each parameter: value, interval, sourced range, determined
    net = cal.network("emulated-1gbit")          # the fitted link between nodes, the methods' fitted stacks
    predict_rows(models, [net], [3], 1, methods, knobs=cal.knobs(methods))

The parameters, each a quantity of one piece of software or one link, shared by every workload (a workload enters
only through its layer profile) and by every method that uses it, in blocks fitted in turn, each to the cells that
move it (the same rules as the study's calibration, harness/predict/fitting.py):

- one node (the methods' cells with every worker on one node): the link between a node's workers
  (`intra_gbit_s`, `intra_latency_s`: loopback TCP for gloo on CPU, NVLink or PCIe for NCCL), the Python time of a
  gradient hook on the training thread (`hook_s`: the hooked methods, harness/schemes/bucketed.py and
  bytescheduler.py), the host time to issue one collective (`launch_s`), the copy rate into and out of a merged
  bucket (`copy_gbyte_s`: torch.cat and the copy back; DDP's reducer copies into its buckets alike), how much
  compute and communication slow each other where they run at once on one processor (`overlap_compute_slowdown`,
  `overlap_comm_slowdown`: gloo's copies and sums on the cores that compute, NCCL's kernels on the GPU that
  computes) and the ByteScheduler engine's GIL hand-off each time its scheduler thread wakes (`engine_handoff_s`);
- each network between nodes (the all-reduce methods' two-node cells on it): the rate its transport reaches
  (`NET:rate_gbit_s`) and the time of a message through it (`NET:latency_s`); a network shaped by the testbed's
  token buckets keeps its bucket (harness/predict/commbench_fit.testbed_burst_bytes), whose bytes pass at the
  unshaped rate underneath (the node's own path, the fitted `intra_gbit_s`);
- the parameter servers (the PS methods' two-node cells, every network): a server's summing rate on a core of its
  own (`server_gbyte_s`; where the run's ranks and servers share one machine's cores, a one-node CPU run or the
  emulated testbed, the server gets cores / (workers + servers) of a core when they outnumber the cores:
  processor sharing, `Group.server_share`) and its CPU per push or pull it handles (`server_message_s`). The PS
  methods' one-node cells are not fitted: with the server on a worker's own host the model has no loopback path for it
  (harness/sim/ps.py), so they would bend the summing rate to stand for a transfer.

A run is a run directory of `ddlbench sweep` (or its summary table): its 1-worker `local` cell of each workload
sets that workload's compute at that run's speed (the one measured single-device throughput; `compute` turns a
layer profile into it), its other cells are the methods'. A two-node `ddlbench commbench` run directory may stand
for the two-node run: the network is then the one its all-reduce and push-pull rows give
(harness/predict/commbench_fit.py, the testbed's token buckets where it ran there) rather than one fitted to the
methods' cells, and the servers' parameters keep their sourced values (the push-pull rows are inverted with them).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import pandas as pd

from harness.core.errors import UserError
from harness.predict.calibration import Bounded, FittedCells, leave_one_workload_out, read_bounded
from harness.predict.commbench_fit import links_from_commbench, read_commbench, testbed_burst_bytes
from harness.predict.compute import compute_model
from harness.predict.fitting import Block, Cells, Fit, fit_params
from harness.predict.predictor import Network, predict_rows
from harness.predict.profiler import counted_profile
from harness.predict.rounds import pooled_sources, summary_of
from harness.sim.costs import Stack
from harness.sim.links import Cluster as ClusterLayout
from harness.sim.links import Link
from harness.sim.ps import SERVER_GBYTE_S

ALLREDUCE = ("ddp", "bsp-a2a", "wfbp-a2a", "mgwfbp", "bytescheduler-a2a")
"""The methods whose cells fix the stack and the links: every collective an all-reduce."""
PS = ("bsp-ps", "wfbp-ps", "bytescheduler-ps")
"""The methods whose two-node cells fix the parameter servers."""
METHODS = ALLREDUCE + PS
HOOKED = ("wfbp-a2a", "mgwfbp", "bytescheduler-a2a", "wfbp-ps", "bytescheduler-ps")
"""Methods that run a Python hook per gradient on the training thread (harness/schemes/bucketed.py with overlap,
harness/schemes/bytescheduler.py); DDP's hooks are its reducer's (C++), BSP's collectives start after backward."""
TCP_PAYLOAD = 1448 / 1514
"""A full TCP segment's payload share of its Ethernet frame (MTU 1500): what a shaped rate carries of data."""


SOURCES = read_bounded(Path(__file__).with_name("own_stacks.toml"))
"""The fitted parameters as data (harness/predict/own_stacks.toml): each one's sourced value and range, its search
bounds, unit and source, by group."""
STACK_SOURCES = SOURCES["stack"]
"""The stack's parameters, fitted to the one-node cells."""
PS_SOURCES = SOURCES["servers"]
"""The parameter servers', fitted to the PS methods' two-node cells."""


def intra_sources(device: str) -> dict[str, Bounded]:
    """The link between the workers of a node, by the device the run computed on."""
    return SOURCES["intra-cuda" if device == "cuda" else "intra-cpu"]


def inter_sources(rate_mbit: float | None) -> dict[str, Bounded]:
    """The network between nodes: its configured rate's TCP payload where the run recorded one."""
    if rate_mbit and math.isfinite(rate_mbit) and rate_mbit > 0:
        rated = SOURCES["inter-rated"]
        return {
            "rate_gbit_s": rated["rate_gbit_s"].scaled(rate_mbit / 1000.0 * TCP_PAYLOAD),
            **{k: b for k, b in rated.items() if k != "rate_gbit_s"},
        }
    return SOURCES["inter"]


# --- the runs -------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Group:
    """The cells of one run on one network at one layout: they share a compute speed (the run's 1-worker cell)
    and a network."""

    run: str
    network: str
    nodes: int
    per_node: int
    servers: int
    server_hosts: str
    rate_mbit: float
    shaped: bool
    device: str
    batch: int
    cores: int = 0
    """Cores of the machine every rank and server of the group ran on, where they shared one (a one-node CPU run,
    the emulated testbed's hosts without a share of their own); 0: each node has its own."""
    host_cpus: float = 0.0
    """Each emulated host's processor share, in cores (`testbed up --host-cpus`), where it had one; 0: none."""

    @property
    def key(self) -> str:
        return f"{self.run}:{self.network}:{self.nodes}x{self.per_node}"

    def server_share(self, nodes: int | None = None, servers: int | None = None) -> float:
        """The share of a core a parameter server gets at `nodes` (default the group's own) with `servers`
        (`server_share`)."""
        n = (nodes or self.nodes) * self.per_node
        return server_share(self.cores, n, servers if servers is not None else (self.servers or 1))


def server_share(cores: int, workers: int, servers: int) -> float:
    """The share of a core a parameter server gets on a machine whose `cores` every one of `workers` ranks and
    `servers` servers shares: cores / (workers + servers) when they outnumber them (processor sharing); 1 where
    each node has its own (`cores` 0). Pure."""
    if not cores:
        return 1.0
    return min(1.0, cores / (workers + servers))


@dataclass
class Runs:
    """The runs' cells: one row per method cell (workload, scheme, group, throughput, std) and each group's
    1-worker iteration time per workload."""

    cells: pd.DataFrame
    groups: dict
    """group key -> Group."""
    local: dict
    """(run, network, workload) -> 1-worker iteration time, s."""
    names: list
    """The runs as given (for messages)."""


def read_runs(sources) -> Runs:
    """The cells of one or more runs (directories or summary tables; the rounds of one sweep file pooled), checked:
    each workload needs its 1-worker cell in every run and network it has method cells on."""
    rows, groups, local, names = [], {}, {}, []
    for src in pooled_sources(sources):  # rounds of one sweep file, read as one run (harness/predict/rounds.py)
        name, s, shaped, cores = summary_of(src)
        names.append(name)
        if "status" in s:
            s = s[s["status"] == "ok"]
        if s.empty:
            raise UserError(f"--calibrate {name}: no cell ended ok; measure it again (`ddlbench sweep`)")
        # the 1-worker cell without a method (a PS method's 1-worker cell pushes to its server: not compute alone)
        for r in s[(s["workers"] == 1) & ~s["scheme"].isin(METHODS)].itertuples():
            local[(name, str(r.network), str(r.workload))] = float(r.iter_s_median)
        methods = s[(s["workers"] > 1) & s["scheme"].isin(METHODS)]
        for r in methods.itertuples():
            nodes = int(r.nodes) if pd.notna(getattr(r, "nodes", np.nan)) else int(r.workers)
            per_node = int(r.workers) // max(1, nodes)
            rate = getattr(r, "network_rate_mbit", None)
            rate = float(rate) if rate is not None and pd.notna(rate) else math.nan
            servers = int(r.servers) if r.servers and r.servers > 0 else 0
            hosts = str(getattr(r, "server_hosts", "") or "")
            share = getattr(r, "host_cpus", None)
            share = float(share) if shaped and share is not None and pd.notna(share) and share > 0 else 0.0
            g = Group(
                name,
                str(r.network),
                nodes,
                per_node,
                servers,
                hosts if hosts in ("dedicated", "colocated") else "colocated",
                rate,
                shaped and nodes > 1,
                "cuda" if str(r.device).startswith("cuda") else "cpu",
                int(r.batch_per_worker),
                # hosts with a processor share of their own do not share the machine's cores
                cores if (shaped or nodes == 1) and not share and not str(r.device).startswith("cuda") else 0,
                share,
            )
            if (name, g.network, str(r.workload)) not in local:
                raise UserError(
                    f"--calibrate {name}: {r.workload} on {g.network} has no 1-worker cell, which sets its "
                    f"compute at that run's speed: sweep it with the baseline on (workers 1, scheme local)"
                )
            key = g.key
            old = groups.get(key)
            if old is not None and old.servers and servers and old.servers != servers:
                raise UserError(
                    f"--calibrate {name}: {g.network} has PS cells with {old.servers} and {servers} servers; "
                    f"calibrate from one server count"
                )
            if old is None or (servers and not old.servers):
                groups[key] = g
            rel = (
                float(r.iter_s_std) / float(r.iter_s_median)
                if r.iter_s_median and r.iter_s_std == r.iter_s_std
                else 0.0
            )
            rows.append(
                {
                    "group": key,
                    "workload": str(r.workload),
                    "scheme": str(r.scheme),
                    "throughput": float(r.throughput_median),
                    "std": float(r.throughput_median) * rel,
                }
            )
    cells = pd.DataFrame(rows, columns=["group", "workload", "scheme", "throughput", "std"])
    if cells.empty:
        raise UserError(
            f"--calibrate {' '.join(names)}: no cell of a method ({', '.join(METHODS)}) with more than one "
            f"worker; sweep the methods to calibrate on one node (workers >= 2)"
        )
    cells = cells.groupby(["group", "workload", "scheme"], as_index=False).median()
    return Runs(cells, groups, local, names)


# --- the model ------------------------------------------------------------------------------------------------


def stacks(v: dict) -> dict[str, Stack]:
    """Each method's stack at the values `v` (ddlbench's own schemes: harness/sim/costs.Stack's fields)."""
    base = Stack(
        launch_s=v["launch_s"],
        copy_bytes_per_s=v["copy_gbyte_s"] * 1e9,
        copy_back=True,
        overlap_compute_slowdown=v["overlap_compute_slowdown"],
        overlap_comm_slowdown=v["overlap_comm_slowdown"],
        gil_release_s=v["engine_handoff_s"],
    )
    return {m: replace(base, hook_s=v["hook_s"] if m in HOOKED else 0.0) for m in METHODS}


def ps_knobs(v: dict, methods=PS, share: float = 1.0) -> dict:
    """The PS methods' server summing rate as their model's knob: the fitted rate on a core of its own, times the
    share of a core the server gets where it shares a machine's cores (Group.server_share)."""
    return {m: {"server_gbyte_s": v["server_gbyte_s"] * share} for m in methods if m in PS}


def intra_link(v: dict) -> Link:
    return Link("fitted (one node)", v["intra_gbit_s"], v["intra_latency_s"], "calibrated from a one-node run")


def inter_link(v: dict, network: str, shaped: bool) -> Link:
    """The fitted link of `network`: its rate and message time, the server's CPU per message, and where the testbed
    shaped it, its token bucket passing at the node's own rate."""
    link = Link(network, v[f"{network}:rate_gbit_s"], v[f"{network}:latency_s"], "calibrated from a two-node run")
    if shaped:
        link = replace(link, burst_bytes=testbed_burst_bytes(), peak_gbit_s=max(v["intra_gbit_s"], link.rate_gbit_s))
    return link


def fitted_network(v: dict, network: str, nodes: int, shaped: bool) -> Network:
    """The fitted network: the link between nodes (the one-node link where `nodes` is 1), the parameter servers'
    point-to-point link (the same, with the server's CPU per message: harness/sim/ps.py charges it on the server),
    every method's stack."""
    intra = intra_link(v)
    inter = inter_link(v, network, shaped) if nodes > 1 else intra
    p2p = replace(inter, per_message_s=v["server_message_s"])
    return Network(network, inter, intra, p2p=p2p, stacks=stacks(v))


class OwnModel:
    """The groups' cells for a set of values: (group, workload, scheme) -> predicted samples/s."""

    def __init__(self, runs: Runs, models: dict):
        self.runs, self.models = runs, models  # models: (group, workload) -> ComputeModel

    def __call__(self, v: dict, keys) -> dict:
        out = {}
        want: dict = {}
        for k in keys:
            want.setdefault((k[0], k[1]), []).append(k[2])
        for (gk, workload), methods in want.items():
            g = self.runs.groups[gk]
            df = predict_rows(
                [self.models[(gk, workload)]],
                [fitted_network(v, g.network, g.nodes, g.shaped)],
                [g.nodes],
                g.per_node,
                [m for m in METHODS if m in methods],
                servers=g.servers or 1,
                knobs=ps_knobs(v, methods, g.server_share()),
                run_id="calibration",
                server_hosts=g.server_hosts,
            )
            got = dict(zip(df["scheme"], df["throughput_median"]))
            for m in methods:
                out[(gk, workload, m)] = float(got.get(m, math.nan))
        return out


# --- the fit --------------------------------------------------------------------------------------------------


def host_share_factor(per_node: int, share: float) -> float:
    """How much slower a rank computes on an emulated host with a processor share of its own (`testbed up
    --host-cpus`) than alone on a free core: the host's `per_node` ranks share min(1, share) of a core. Pure."""
    return max(1.0, per_node) / min(1.0, share)


def profile_compute(profiles: dict | None = None) -> Callable:
    """compute(workload, group, local_iter_s) -> the workload's ComputeModel at the group's batch, its layer
    profile (`profiles`: workload -> `ddlbench profile` table; FLOP counts where none) scaled to the run's
    1-worker iteration. On hosts with a processor share of their own, the profile (measured alone, on a free core)
    slowed by the share instead (`host_share_factor`): the share is configured, and the profile repeats within 3 %
    on this machine, while one 1-worker cell in a CFS-throttled host moved by up to 21 % between rounds of the same
    sweep (reports/own-calibration/README.md)."""

    cache: dict = {}

    def compute(workload: str, g: Group, local_s: float):
        table = (profiles or {}).get(workload)
        if table is None:  # FLOP counts split the time between layers (a roofline); the run's speed sets it
            if (workload, g.batch) not in cache:
                cache[(workload, g.batch)] = counted_profile(workload, g.batch)
            return compute_model(
                cache[(workload, g.batch)], "study-gpu", throughput=g.batch / local_s, batch=g.batch, mode="flops"
            )
        m = compute_model(table, batch=g.batch)
        if g.host_cpus and g.device == "cpu":
            f = host_share_factor(g.per_node, g.host_cpus)
            return m.scaled(f, device=f"host share x{f:.3f}")
        return m.scaled(local_s / m.iteration_s, device=f"run x{local_s / m.iteration_s:.3f}")

    return compute


@dataclass
class OwnCalibration(FittedCells):
    """ddlbench's own stacks as the runs calibrated them (harness/predict/calibration.Calibration): it enters a
    prediction through the networks' stacks (`stacks`), the PS methods' knobs (`knobs`), the compute at the runs'
    speed (`compute`), and, where the request names no network, the networks the two-node run fitted."""

    fit: Fit
    runs: Runs
    cells: pd.DataFrame
    """Each fitted cell: group, workload, scheme, measured, std, predicted, error."""
    lowo: pd.DataFrame | None
    """Leave-one-workload-out: each workload's cells predicted by a fit to the others (None: one workload)."""
    unfitted: pd.DataFrame
    """Cells measured but not fitted (the PS methods on one node), predicted at the fit, with the reason."""
    measured: dict = field(default_factory=dict)
    """Networks a two-node `ddlbench commbench` gave instead of a two-node run: label -> (Network without
    stacks, the layout it was measured on as a Group)."""

    def draws(self, n: int, seed: int = 0) -> list[dict]:
        """n value sets: every value, the fitted ones drawn from the bootstrap."""
        return [{**self.fit.values, **d} for d in self.fit.draws(n, seed)]

    @property
    def networks(self) -> list[str]:
        """The networks between nodes the runs fitted (their two-node cells) or a two-node commbench measured."""
        return sorted({g.network for g in self.runs.groups.values() if g.nodes > 1} | set(self.measured))

    def network(self, label: str, values: dict | None = None) -> Network:
        """The fitted network `label` (one of `networks`) with every method's fitted stack."""
        v = values or self.fit.values
        if label not in self.networks:
            raise UserError(
                f"the calibration fitted no network {label!r} (it fitted {', '.join(self.networks) or 'none'}): "
                f"give --calibrate a two-node run on it"
            )
        if label in self.measured:  # the links as commbench measured them, the stacks as the runs fitted them
            return replace(self.measured[label][0], intra=intra_link(v), stacks=stacks(v))
        return fitted_network(v, label, 2, self.layout(label).shaped)

    methods = METHODS
    """The methods its parameters cover; the others (dear, fsdp, ...) are predicted with their stacks as stated."""

    def compute(self, model):
        """The compute model at the runs' speed (`at_run_speed`)."""
        return self.at_run_speed(model)

    def check_request(self, methods: list[str], networks_given: bool, where: str) -> None:
        """Every method's parameters rest on cells of the runs, and there is a network to predict on (one given, or
        one the two-node run fitted)."""
        self.check_methods(methods)
        if not (networks_given or self.networks):
            raise UserError(
                f"--calibrate {where}: a one-node run fits the stacks, not the network between nodes: add a "
                f"two-node run (--calibrate RUN2), or give the network (--link, --commbench or --cluster FILE.toml)"
            )

    def calibrated_knobs(self, methods, knobs: dict | None, share: float = 1.0) -> dict:
        """Every method's knobs: the calibration's (`knobs`, the server share `share`) under the request's."""
        return {m: {**self.knobs([m], share=share).get(m, {}), **(knobs or {}).get(m, {})} for m in methods}

    def at_run_speed(self, m):
        """Compute model `m` scaled to the first run's 1-worker cell of its workload at its batch (the speed the
        calibration saw), or on hosts with a processor share of their own, a measured CPU profile slowed by that
        share (`profile_compute`); `m` itself where no run has one."""
        for (run, net, w), s in self.runs.local.items():
            g = next((g for g in self.runs.groups.values() if g.run == run and g.network == net), None)
            if w == m.workload and g is not None and g.batch == m.batch:
                if g.host_cpus and m.device == "cpu":  # a measured CPU profile, at the host's share
                    f = host_share_factor(g.per_node, g.host_cpus)
                    return m.scaled(f, device=f"{m.device} at the hosts' share")
                return m.scaled(s / m.iteration_s, device=f"{m.device} at the run's speed")
        return m

    def shared_cores(self) -> int:
        """The cores of the machine the runs' ranks shared (a one-node CPU run, the testbed); 0 where none did."""
        return max((g.cores for g in self.runs.groups.values()), default=0)

    def layout(self, label: str) -> Group:
        """The layout the network `label` was fitted or measured on."""
        if label in self.measured:
            return self.measured[label][1]
        return next(g for g in self.runs.groups.values() if g.network == label and g.nodes > 1)

    def stacks(self, values: dict | None = None) -> dict[str, Stack]:
        return stacks(values or self.fit.values)

    def knobs(self, methods, values: dict | None = None, share: float = 1.0) -> dict:
        """The methods' model knobs the calibration sets (the servers' summing rate, times `share`:
        Group.server_share of the layout predicted)."""
        return ps_knobs(values or self.fit.values, methods, share)

    def check_methods(self, methods) -> None:
        """A one-line error for a method whose parameters no cell of the runs fixed."""
        have = set(self.cells["scheme"])
        servers = bool(have & set(PS)) or any(g.servers for _, g in self.measured.values())
        for m in methods:
            if m in METHODS and not ((m in ALLREDUCE and have & set(ALLREDUCE)) or (m in PS and servers)):
                block = "the parameter servers' (server_gbyte_s, server_message_s)" if m in PS else "the stack's"
                raise UserError(
                    f"--calibrate {' '.join(self.runs.names)}: {m} cannot be predicted calibrated: "
                    f"{block} parameters rest on two-node cells of {', '.join(PS if m in PS else ALLREDUCE)}, and "
                    f"the runs have none: add {m} to the two-node sweep"
                )


def _blocks(runs: Runs, cells: Cells) -> tuple[list[Block], dict]:
    one = [g for g in runs.groups.values() if g.nodes == 1]
    two = [g for g in runs.groups.values() if g.nodes > 1]
    device = (one or two)[0].device
    start, blocks = {}, []
    stack_params = []
    for name, s in intra_sources(device).items():  # only a one-node run's cells cross it
        start[name] = s.input.value
        stack_params.append(s.param(search=bool(one)))
    for name, s in STACK_SOURCES.items():
        start[name] = s.input.value
        stack_params.append(s.param())
    first = tuple(k for k in cells.mean if runs.groups[k[0]].nodes == 1 and k[2] in ALLREDUCE)
    nets = []
    for net in sorted({g.network for g in two}):
        g = next(x for x in two if x.network == net)
        params = []
        for name, s in inter_sources(g.rate_mbit).items():
            start[f"{net}:{name}"] = s.input.value
            params.append(s.param(f"{net}:{name}"))
        ks = tuple(k for k in cells.mean if runs.groups[k[0]].network == net and runs.groups[k[0]].nodes > 1)
        nets.append(Block(f"network {net}", tuple(params), tuple(k for k in ks if k[2] in ALLREDUCE)))
    if first:  # the stack from the one-node cells, then each network from its two-node cells
        blocks += [Block("stack", tuple(stack_params), first), *nets]
    else:  # one worker per node (a node's 1-worker cell is its run alone): the stack and the networks together,
        # from the two-node cells, where the one cannot be fitted before the other
        blocks.append(
            Block(
                "stack and networks",
                tuple(stack_params) + tuple(p for b in nets for p in b.params),
                tuple(k for k in cells.mean if k[2] in ALLREDUCE),
            )
        )
    ps_cells = tuple(k for k in cells.mean if runs.groups[k[0]].nodes > 1 and k[2] in PS)
    params = []
    for name, s in PS_SOURCES.items():
        start[name] = s.input.value
        params.append(s.param(search=bool(ps_cells)))
    blocks.append(Block("parameter servers", tuple(params), ps_cells))
    return [b for b in blocks if b.cells and any(p.search for p in b.params)], start


def _fitted(runs: Runs) -> pd.DataFrame:
    """The cells the fit uses: every method cell but the PS methods' on one node."""
    one = {k for k, g in runs.groups.items() if g.nodes == 1}
    return runs.cells[~(runs.cells["group"].isin(one) & runs.cells["scheme"].isin(PS))]


def _cells(df: pd.DataFrame) -> Cells:
    keys = list(zip(df["group"], df["workload"], df["scheme"]))
    return Cells(dict(zip(keys, df["throughput"])), dict(zip(keys, df["std"])))


def _models(runs: Runs, compute: Callable) -> dict:
    out = {}
    for gk, workload in runs.cells[["group", "workload"]].drop_duplicates().itertuples(index=False):
        g = runs.groups[gk]
        out[(gk, workload)] = compute(workload, g, runs.local[(g.run, g.network, workload)])
    return out


def fit_runs(runs: Runs, models: dict, workloads=None, starts: int = 2, polish: bool = True) -> tuple[Fit, Cells]:
    df = _fitted(runs)
    if workloads is not None:
        df = df[df["workload"].isin(workloads)]
    cells = _cells(df)
    blocks, start = _blocks(runs, cells)
    fit = fit_params(blocks, OwnModel(runs, models), cells, start, starts=starts, polish=polish)
    return fit, cells


def _table(fit_values: dict, runs: Runs, models: dict, df: pd.DataFrame) -> pd.DataFrame:
    keys = list(zip(df["group"], df["workload"], df["scheme"]))
    got = OwnModel(runs, models)(fit_values, keys) if keys else {}
    out = df.rename(columns={"throughput": "measured"}).copy()
    out["predicted"] = [got.get(k, math.nan) for k in keys]
    out["error"] = out["predicted"] / out["measured"] - 1
    return out.reset_index(drop=True)


def calibrate_own(sources, compute: Callable | None = None, lowo: bool = True, starts: int = 2) -> OwnCalibration:
    """Fit ddlbench's own stacks to the runs (directories or summary tables: a one-node run, and optionally a
    two-node run); `compute` as `profile_compute` returns (default: FLOP counts per workload); with `lowo`, each
    workload's cells are also predicted by a fit to the other workloads."""
    sources = list(sources)
    benches = [x for x in sources if is_commbench(x)]
    if benches and len(benches) == len(sources):
        raise UserError(
            f"--calibrate {' '.join(map(str, benches))}: a commbench measures the network, not the stacks: give the "
            f"one-node run of the methods first (--calibrate ONE --calibrate {benches[0]})"
        )
    runs = read_runs([x for x in sources if x not in benches])
    measured = {}
    for b in benches:
        measured.update(commbench_networks(b, runs))
    models = _models(runs, compute or profile_compute())
    workloads = sorted(set(runs.cells["workload"]))

    def whole() -> Fit:
        return fit_runs(runs, models, starts=starts)[0]

    def fold(w: str) -> pd.DataFrame:
        f, _ = fit_runs(runs, models, [x for x in workloads if x != w], starts=starts)
        df = _fitted(runs)
        return _table(f.values, runs, models, df[df["workload"] == w]).assign(held_out=w)

    fit, held = leave_one_workload_out(workloads, fold, whole) if lowo else (whole(), None)
    fitted = _table(fit.values, runs, models, _fitted(runs))
    one = {k for k, g in runs.groups.items() if g.nodes == 1}
    rest = runs.cells[runs.cells["group"].isin(one) & runs.cells["scheme"].isin(PS)]
    unfitted = _table(fit.values, runs, models, rest).assign(
        reason="a PS method on one node: the model has no loopback path to a server on a worker's own host"
    )
    return OwnCalibration(fit, runs, fitted, held, unfitted, measured)


def calibrate_stacks(sources: tuple, profiles: dict) -> OwnCalibration:
    """The door of ddlbench's own stacks (harness/predict/clusters.ClusterEntry.calibrate): the runs given to
    `--calibrate`, each workload's compute from its profile where given (FLOP counts elsewhere); no
    leave-one-workload-out (the report's: experiments/own_calibration/)."""
    return calibrate_own(sources, profile_compute(profiles), lowo=False)


def is_commbench(source) -> bool:
    """Whether `source` is a `ddlbench commbench` run directory (a commbench table and no sweep summary)."""
    p = Path(source) if not isinstance(source, pd.DataFrame) else None
    return p is not None and (p / "commbench.parquet").is_file() and not (p / "summary.parquet").exists()


def commbench_networks(source, runs: Runs) -> dict:
    """label -> (Network, Group) from a two-node commbench run directory: its all-reduce rows give the link
    between nodes, its push-pull rows (one server beside a worker, as `--servers 1` on the testbed places it) the
    parameter servers' (harness/predict/commbench_fit.py; the testbed's token buckets where it ran there)."""
    p = Path(source)
    if not [g for g in runs.groups.values() if g.nodes == 1]:
        raise UserError(
            f"--calibrate {p}: a commbench measures the network, not the stacks: give the one-node run of the "
            f"methods first (--calibrate ONE --calibrate {p})"
        )
    df = read_commbench([p])
    env = p / "environment.parquet"
    e = pd.read_parquet(env) if env.is_file() else pd.DataFrame()
    shaped = bool(
        len(e) and "testbed_hosts" in e and pd.notna(e["testbed_hosts"].iloc[0]) and e["testbed_hosts"].iloc[0]
    )
    out = {}
    for label, rows in df.groupby("network"):
        workers = int(rows.loc[rows["collective"] == "allreduce", "workers"].max())
        if workers < 2:
            raise UserError(
                f"--calibrate {p}: its all-reduce rows on {label} are at {workers} worker; measure two nodes "
                f"(`ddlbench commbench --workers 2` across them, sizes 4K to 32M)"
            )
        pushpull = (rows["collective"] == "pushpull").any()
        any_link = Link("unused", 1.0, 0.0)
        layout = ClusterLayout(workers, 1, any_link, any_link, 1, server_hosts="colocated") if pushpull else None
        link, p2p, fits = links_from_commbench(rows, testbed_burst_bytes() if shaped else 0.0, layout, SERVER_GBYTE_S)
        # the push-pull rows carry the server as it ran there, sharing or not: no share of cores applied on top
        g = Group(str(p), str(label), workers, 1, 1 if pushpull else 0, "colocated", math.nan, shaped, "cpu", 0)
        out[str(label)] = (Network(str(label), link, link, fits, p2p), g)
    return out
