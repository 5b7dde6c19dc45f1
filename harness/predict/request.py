"""`ddlbench predict` (harness/cli/commands/predict.py): a cluster described by link presets, measured commbench runs
or a whole cluster (registered, or a file), compute from profiles or FLOP counts, every method predicted;
`PredictSpec` carries what the command was asked."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from harness.core.atomic import write_parquet_atomic
from harness.core.errors import UserError
from harness.experiment.sweep import knob_value
from harness.predict.calibration import require_converged
from harness.predict.cluster_file import is_cluster_file, read_cluster_file
from harness.predict.clusters import CLUSTERS, ClusterEntry, one_calibration
from harness.predict.commbench_fit import (
    links_from_commbench,
    read_commbench,
    testbed_burst_bytes,
)
from harness.predict.compute import compute_model, get_device
from harness.predict.own_clusters import fitted_clusters, networks_cluster
from harness.predict.predictor import (
    Network,
    method_knobs,
    resolve_methods,
)
from harness.predict.profile_table import PROFILE_COLUMNS, PROFILE_OPTIONAL
from harness.predict.profiler import counted_profile
from harness.results.files import check_output_file, read_table
from harness.results.store import COMMBENCH_NEEDS, load_run
from harness.sim.links import LINKS, Cluster, get_link
from harness.sim.ps import SERVER_GBYTE_S
from workloads import WORKLOADS


@dataclass(frozen=True)
class PredictSpec:
    """What `ddlbench predict` is asked (its options, harness/cli/commands/predict.py)."""

    profiles: tuple = ()
    """Profile tables from `ddlbench profile` (paths or DataFrames)."""
    workloads: tuple = ()
    """Workloads to predict from FLOP counts (with `device_preset`)."""
    device_preset: str | None = None
    """Device preset for calibration (e.g. study-gpu)."""
    throughput_samples_per_s: float | None = None
    """Measured one-device throughput (calibration)."""
    batch: int | None = None
    """Per-worker batch (None: the preset's or the profile's)."""
    compute: str = "auto"
    """auto | profile | flops: per-layer times from the measured profile or from FLOP counts."""
    links: tuple = ()
    """Link presets between nodes (harness/sim/links.LINKS); none given: ib-100g, unless clusters or commbench
    runs are."""
    clusters: tuple = ()
    """Whole clusters: registered names (harness/predict/clusters.py: the study's study-*) or cluster files
    (.toml, harness/predict/cluster_file.py)."""
    intervals: int = 0
    """Samples of the inputs' ranges behind each row's pred_low/pred_high (clusters that state them; 0: none)."""
    commbench: tuple = ()
    """Measured commbench runs (directories or Parquet files): a network of their own."""
    label: str | None = None
    """The rows' network label for the measured network (None: commbench)."""
    intra: str = "pcie3-x16"
    """The link between the GPUs of a node."""
    nodes: str = "1,2,4,8"
    """Node counts, comma-separated."""
    gpus_per_node: int | str | None = None
    """GPUs (workers) per node of the link presets' nodes, comma-separated (None: 4); a cluster's are its own."""
    servers: int = 0
    """Parameter-server processes of a PS cell (0: one per worker node, harness/contracts/cell.per_worker_node)."""
    server_hosts: str = "dedicated"
    """Where parameter servers run: dedicated | colocated."""
    shaped: bool = False
    """The commbench rows were measured on the testbed: model its token-bucket shaped links."""
    schemes: str = "all"
    """Methods, comma-separated; all, or study for the study's seven."""
    allreduce: str = "ring"
    """The all-reduce algorithm modelled across nodes: ring | hierarchical."""
    knobs: dict | None = None
    """method -> {knob: value}."""
    against: str | Path | None = None
    """A run directory whose measured summary the predictions are compared with (checked here, compared by
    harness/report/validation.py)."""
    output: str | Path | None = None
    """Where the table goes (Parquet)."""
    dtype: str = "fp32"
    """Compute dtype of the predicted cells: fp32 only."""
    calibrate: tuple = ()
    """A one-node run directory or table and, optionally, a two-node one: the named cluster's software costs and
    then its transports are fitted to them before predicting (the cluster's own calibration,
    harness/predict/clusters.py; the study's: harness/study/calibration.py, two_node.py)."""


def _ints(text: str, what: str) -> list[int]:
    try:
        out = [int(x) for x in str(text).split(",") if x.strip()]
    except ValueError:
        raise UserError(f"{what} must be comma-separated integers like 1,2,4,8, got {text!r}") from None
    if not out or min(out) < 1:
        raise UserError(f"{what} must be integers >= 1, got {text!r}")
    return out


def parse_method_knobs(pairs) -> dict:
    out: dict = {}
    for pair in pairs:
        if "=" not in pair or "." not in pair.split("=", 1)[0]:
            raise UserError(f"--knob {pair!r} is not METHOD.NAME=VALUE; write e.g. --knob ddp.bucket_cap_mb=50")
        key, value = pair.split("=", 1)
        method, name = key.split(".", 1)
        out.setdefault(method.strip(), {})[name.strip()] = knob_value(value)
    return out


# complex by design (C901): one check per option, each its own one-line error
def check_inputs(spec: PredictSpec) -> tuple[list, dict[str, ClusterEntry]]:  # noqa: C901
    """Everything `spec` asks checked before any work (FLOP counting takes seconds per workload); returns the
    profile tables and the clusters, each read once."""
    if spec.dtype != "fp32":  # docs/ARCHITECTURE.md, "Precision"
        raise UserError(
            f"predict models fp32 cells only, not {spec.dtype!r}: its compute comes from an fp32 profile "
            f"or fp32 FLOP rates, and it does not invent a bf16 speed-up; measure with `ddlbench run "
            f"--dtype {spec.dtype}`"
        )
    throughput, batch = spec.throughput_samples_per_s, spec.batch
    for name, value, low in (("--throughput", throughput, 0.0), ("--batch", batch, 0)):
        if value is not None and not (math.isfinite(value) and value > low):
            raise UserError(f"{name} must be a finite number > 0, got {value}; fix the option")
    if spec.servers < 0:
        raise UserError(f"--servers must be >= 1 (or left out: one per worker node), got {spec.servers}")
    clusters = _check_network(spec)
    _check_knobs(spec.knobs or {}, resolve_methods(spec.schemes))
    preset = get_device(spec.device_preset) if spec.device_preset else None
    tables = [p if isinstance(p, pd.DataFrame) else _read_profile(p) for p in spec.profiles]
    for w in spec.workloads:
        WORKLOADS.get(w)
    for w in [*spec.workloads, *(str(t["workload"].iloc[0]) for t in tables if len(t) and "workload" in t)]:
        if preset is not None and throughput is None and w not in preset.throughput:
            known = ", ".join(sorted(preset.throughput)) or "none"
            raise UserError(
                f"device preset {preset.name!r} has no measured throughput for {w!r} (it has: "
                f"{known}); give --throughput SAMPLES_PER_S measured on one device"
            )
    for c in spec.commbench or ():
        f = Path(c) / "commbench.parquet" if Path(c).is_dir() else Path(c)
        if not f.is_file():
            raise UserError(f"commbench table {f} does not exist: run `ddlbench commbench --output DIR`")
        _needs(
            read_table(f, fix="measure it again with `ddlbench commbench --output DIR`"),
            COMMBENCH_NEEDS,
            f,
            "a commbench table",
            "ddlbench commbench --output DIR",
        )
    if spec.against and load_run(spec.against).summary.empty:
        raise UserError(
            f"--validate {spec.against} holds no measured cells to compare with: give a run directory "
            f"of `ddlbench sweep`"
        )
    if spec.output:
        check_output_file(spec.output, "-o/--output")
    return tables, clusters


def _check_network(spec: PredictSpec) -> dict[str, ClusterEntry]:
    """The link presets known, the clusters read (registered or files), each at node counts and a GPU count it
    is modelled at."""
    nodes, per_node = _ints(spec.nodes, "--nodes"), _per_node(spec)
    for n in (*spec.links, spec.intra):
        if n not in LINKS:
            hint = f"; --cluster {n} predicts that whole cluster" if n in CLUSTERS else ""
            raise UserError(
                f"unknown network preset {n!r}: known presets are {', '.join(sorted(LINKS))} (or give "
                f"--commbench FILE.parquet with measured all-reduce times){hint}"
            )
    clusters = {n: read_cluster_file(n) if is_cluster_file(n) else CLUSTERS.get(n) for n in spec.clusters}
    for name, entry in clusters.items():
        if spec.gpus_per_node is not None and set(per_node) != {entry.gpus_per_node}:
            raise UserError(
                f"--cluster {name}: its nodes hold {entry.gpus_per_node} GPUs; drop --gpus-per-node "
                f"(it sets the --link presets' nodes only)"
            )
        for n in nodes:
            entry.check_nodes(n)
    return clusters


def _per_node(spec: PredictSpec) -> list[int]:
    return _ints(4 if spec.gpus_per_node is None else spec.gpus_per_node, "--gpus-per-node")


def _check_knobs(knobs: dict, methods: list[str]) -> None:
    """--knob METHOD.NAME=VALUE: a predicted method's knob, a finite number >= 0 where its default is one."""
    for method, given in knobs.items():
        if method not in methods:
            raise UserError(
                f"--knob {method}.*: method {method!r} is not predicted here (--schemes gives "
                f"{', '.join(methods)}); add it to --schemes or drop the knob"
            )
        defaults = method_knobs(method)
        for name, value in method_knobs(method, given).items():
            _check_knob(method, name, value, defaults[name])


def _check_knob(method: str, name: str, value, default) -> None:
    if isinstance(default, str) or (value is None and default is None):
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise UserError(
            f"--knob {method}.{name}={value!r} must be a finite number >= 0 (default {default!r}); fix the value"
        )


def _read_profile(path) -> pd.DataFrame:
    """A stored profile table; columns added later (PROFILE_OPTIONAL) may be absent."""
    if not Path(path).is_file():
        raise UserError(f"profile {path} does not exist: make it with `ddlbench profile WORKLOAD -o {path}`")
    df = read_table(path, fix=f"make it again with `ddlbench profile WORKLOAD -o {path}`")
    return _needs(
        df,
        [c for c in PROFILE_COLUMNS if c not in PROFILE_OPTIONAL],
        path,
        "a profile table",
        f"ddlbench profile WORKLOAD -o {path}",
    )


def _needs(df: pd.DataFrame, columns, path, what: str, make: str) -> pd.DataFrame:
    """df, if it has rows and every column of its contract; else a UserError naming the file."""
    missing = [c for c in columns if c not in df]
    if df.empty or missing:
        why = f"no {', '.join(missing[:3])} column" if missing else "no rows"
        raise UserError(f"{path} is not {what} ({why}): make one with `{make}`")
    return df


def load_models(profiles, workloads, device_preset, throughput, batch, compute):
    if not profiles and not workloads:
        raise UserError(
            "nothing to predict: give --profile FILE.parquet (from `ddlbench profile`) or "
            "--workload NAME with --device-preset"
        )
    tables = [p if isinstance(p, pd.DataFrame) else _read_profile(p) for p in profiles]
    for w in workloads:
        if device_preset is None and throughput is None:
            raise UserError(
                f"--workload {w} predicts from FLOP counts, which need --device-preset (and its "
                f"measured throughput) or --throughput; or give --profile"
            )
        tables.append(counted_profile(w, batch if device_preset is None else None))
    return [compute_model(t, device_preset, throughput, batch, compute) for t in tables]


def load_networks(
    names, commbench, intra, label, shaped: bool = False, gpus_per_node="4", servers=0, server_hosts="dedicated"
):
    intra_link = get_link(intra)
    nets = [Network(n, get_link(n), intra_link) for n in names]
    if shaped and not commbench:
        raise UserError(
            "--testbed-shaping models the testbed's links from its measured all-reduce: give "
            "--commbench DIR from `ddlbench commbench --testbed` at the same rate"
        )
    if commbench:
        df = read_commbench(commbench)
        link, p2p, measured = links_from_commbench(
            df,
            testbed_burst_bytes() if shaped else 0.0,
            _ps_layout(df, gpus_per_node, servers, server_hosts),
            SERVER_GBYTE_S,
        )
        nets.append(Network(label or "commbench", link, link, measured, p2p))
    return nets


def _ps_layout(df, gpus_per_node, servers, server_hosts):
    """Where workers and servers sat for the commbench push-pull rows (of table `df`), to fit the
    parameter-server link: their worker count over the first --workers-per-node, with --servers and
    --server-hosts."""
    if df is None:
        return None

    pp = df[df["collective"] == "pushpull"]
    if pp.empty:
        return None
    workers, g = int(pp["workers"].max()), _ints(gpus_per_node, "--gpus-per-node")[0]
    if workers % g:
        raise UserError(
            f"the push-pull rows have {workers} workers, which --workers-per-node {g} does not "
            f"divide: give the layout they were measured on"
        )
    link = get_link("eth-10g")  # unused: only the layout matters for the fit
    return Cluster(workers // g, g, link, link, servers, server_hosts=server_hosts)


def _calibration(spec: PredictSpec, targets: dict, clusters: dict, methods: list[str], profiles: list):
    """The calibration --calibrate asks, through the one door (harness/predict/clusters.py): the `calibrate` every
    predicted cluster shares (a registered cluster's own; ddlbench's own stacks for link presets, commbench networks
    and cluster files), checked against what is predicted; None without --calibrate."""
    if not spec.calibrate:
        return None
    where = " ".join(map(str, spec.calibrate))
    registered = [n for n in clusters if not is_cluster_file(n)]
    if registered and len(registered) < len(clusters):
        raise UserError(
            f"--calibrate {where}: {', '.join(registered)} carries its own stacks and calibration (a one-node "
            f"table of its methods); ddlbench's own stacks are calibrated for --link, --commbench or a "
            f"cluster file: predict {registered[0]} alone with its one-node table, or drop it"
        )
    by_workload = {str(t["workload"].iloc[0]): t for t in profiles if len(t)}
    cal = one_calibration(targets, where)(tuple(spec.calibrate), by_workload)
    cal.check_request(methods, bool(spec.links or spec.commbench or clusters), where)
    return require_converged(
        cal, where, "nothing is predicted from it: check the table's cells (a method far from the others' scale?)"
    )


def _targets(spec: PredictSpec, clusters: dict, links: tuple) -> dict[str, ClusterEntry]:
    """What is predicted, each as a cluster: the link presets and commbench networks on ddlbench's own stacks (one
    entry, its networks read when predicted), then the clusters (registered names or files)."""
    out: dict[str, ClusterEntry] = {}
    if links or spec.commbench:
        per_node = _per_node(spec)

        def networks():
            return load_networks(
                links,
                spec.commbench,
                spec.intra,
                spec.label,
                spec.shaped,
                per_node[0],
                spec.servers,
                spec.server_hosts,
            )

        out[NETWORKS] = networks_cluster(networks, per_node, spec.servers, spec.allreduce, spec.server_hosts)
    return {**out, **clusters}


NETWORKS = "--link/--commbench"
"""The targets' name of the link presets and commbench networks (one cluster on ddlbench's own stacks)."""


def run_predict(spec: PredictSpec = PredictSpec(), **changes):
    """The predicted table for `spec` (with `changes` applied: run_predict(workloads=("resnet50",), ...)), every
    input checked first: link presets and measured commbench runs by ddlbench's own stacks, whole clusters
    (registered names or files, harness/predict/clusters.py) by their own curve, the same simulation; with
    `intervals` samples each cluster row gets `pred_low`/`pred_high` from its inputs' ranges."""
    spec = dataclasses.replace(spec, **changes)
    profiles, clusters = check_inputs(spec)
    links = spec.links or (() if clusters or spec.commbench else ("ib-100g",))
    alone = not links and not spec.commbench  # clusters only
    if spec.intervals and (not alone or any(e.intervals is None for e in clusters.values())):
        named = ", ".join(n for n in CLUSTERS if CLUSTERS.get(n).intervals is not None) or "none registered"
        raise UserError(
            f"--intervals needs input ranges, which only a cluster that states them has ({named}): "
            f"predict such clusters alone (--cluster), or drop --intervals"
        )
    nodes, methods = _ints(spec.nodes, "--nodes"), resolve_methods(spec.schemes)
    targets = _targets(spec, clusters, links)
    cal = _calibration(spec, targets, clusters, methods, profiles)
    if cal is not None and not (spec.links or spec.commbench or clusters):  # the networks the calibration fitted
        per_node = _per_node(spec) if spec.gpus_per_node is not None else None
        targets = fitted_clusters(cal, per_node, spec.servers, spec.allreduce, spec.server_hosts)
    models = load_models(
        profiles, spec.workloads, spec.device_preset, spec.throughput_samples_per_s, spec.batch, spec.compute
    )
    if cal is not None and spec.throughput_samples_per_s is None:
        models = [cal.compute(m) for m in models]
    frames = []
    for entry in targets.values():
        kw = dict(node_counts=nodes, methods=methods, knobs=spec.knobs, calibration=cal)
        frames.append(entry.intervals(models, spec.intervals, **kw) if spec.intervals else entry.curve(models, **kw))
    df = pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]
    if cal is not None:  # what was fitted, for the command to say (DataFrame.attrs travel with the table)
        df.attrs["calibration"] = cal.table().to_dict("records")
        if cal.methods is not None:  # methods the calibration does not cover, predicted as stated
            df.attrs["uncalibrated"] = [m for m in methods if m not in cal.methods]
    if spec.output:
        write_parquet_atomic(df, Path(spec.output))
    return df
