"""The predictor against the emulated testbed (experiments/testbed_validation/run.py has the commands): every
measured cell of testbed sweeps predicted from inputs measured apart from those cells, on its own layout, in three
compute variants, and compared cell by cell."""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

from harness.core.atomic import write_parquet_atomic
from harness.core.errors import UserError
from harness.predict.commbench_fit import (
    fit_commbench,
    link_from_allreduce,
    links_from_commbench,
    read_commbench,
    testbed_burst_bytes,
)
from harness.predict.compute import compute_model
from harness.predict.own_calibration import host_share_factor
from harness.predict.predictor import SEVEN_METHODS, Network, predict_rows
from harness.report.prediction import save, validation_scatter
from harness.report.validation import KEYS, format_validation, validate
from harness.results.store import load_run
from harness.sim.links import Cluster, Link
from harness.sim.ps import SERVER_GBYTE_S
from harness.testbed.netns import parse_rate

METHODS = ["ddp", *SEVEN_METHODS]


RUN_SCALED = "run-scaled"
"""The compute variant at the run's own speed: the contended profile scaled by the run's 1-worker `local` cell over
the profile measured alone (not a calibration: `ddlbench predict --calibrate` fits the stacks, this scales compute)."""
VARIANTS = (RUN_SCALED, "contended", "alone")
"""The compute variants every cell is predicted in (variant_model), besides SHARED."""
HOST_SHARE = "host-share"
"""A compute variant from first principles for hosts with a processor share of their own (`testbed up --host-cpus`,
issue 60): the profile measured alone on a free core, slowed by 1 / min(1, share) (a host with 0.4 of a core
computes 2.5x slower); it reads no 1-worker cell, whose time a CFS-throttled host measures with a spread of its own."""
SHARED = "shared"
"""A fourth compute variant, from first principles (issue 51): the profile measured alone at the run's own speed
(its 1-worker cell), slowed by the share of the machine's cores each rank gets when the emulated hosts' ranks
compute at once, max(1, ranks / cores): processor sharing. The contended profile measures copies that do not
compute in lockstep (3 copies on 2 cores ran 1.27x slower, not 1.5x); the cells' ranks do."""


def run_cores(run) -> int | None:
    """The cores of the machine a run directory ran on (its environment's cpu_count), None where not recorded."""
    try:
        env = load_run(run).environment
    except (OSError, ValueError, UserError):
        return None
    if env is None or env.empty or "cpu_count" not in env or pd.isna(env["cpu_count"].iloc[0]):
        return None
    return int(env["cpu_count"].iloc[0])


def shared_compute(alone, local_s: float, ranks: int, cores: float | None):
    """The SHARED variant's compute model: `alone` at the run's speed (its 1-worker cell: one rank on `cores`),
    slowed by the processor each of `ranks` single-threaded ranks computing at once on those `cores` gets against
    the one rank of the 1-worker cell, which had min(1, cores): max(1, ranks / max(1, cores)). That is
    max(1, ranks / cores) on a machine whose whole cores every host shares, and 1 for one rank on a host with a share
    of its own (`testbed up --host-cpus`, where its 1-worker cell ran on the same share)."""
    if cores is None:
        raise UserError("the shared compute variant needs the machine's cores: the run's environment has no cpu_count")
    f = local_s / alone.iteration_s * max(1.0, ranks / max(1.0, cores))
    return alone.scaled(f, device=f"shared x{f:.3f}")


def host_share(rows: pd.DataFrame) -> float | None:
    """The processor share of each emulated host the cells `rows` ran on (their `host_cpus`), None without one."""
    if "host_cpus" not in rows:
        return None
    v = pd.to_numeric(rows["host_cpus"], errors="coerce").dropna()
    return float(v.iloc[0]) if len(v) and v.iloc[0] > 0 else None


_ANY = Link("unused", 1.0, 0.0)  # a layout's links are not used when fitting the PS link


def _commbench_index(paths: list[Path]) -> dict[tuple[int, float], Path]:
    """(workers, link rate in Mbit/s) -> commbench run directory. `commbench --testbed` labels its rows
    with the testbed's rate (`emulated-200mbit`), whatever a sweep named that network profile."""
    out = {}
    for p in paths:
        df = read_commbench([p])
        for (w, net), _ in df.groupby(["workers", "network"]):
            if not str(net).startswith("emulated-"):
                raise UserError(
                    f"{p} was not measured on the testbed (network {net!r}): measure with "
                    f"`ddlbench commbench --testbed`"
                )
            out[(int(w), parse_rate(str(net)[len("emulated-") :]))] = p
    return out


def _profiles(paths: list[Path]) -> dict[tuple[str, int], pd.DataFrame]:
    """(workload, concurrent) -> profile table."""
    out = {}
    for p in paths:
        t = pd.read_parquet(p)
        conc = int(t["concurrent"].iloc[0]) if "concurrent" in t else 1
        out[(str(t["workload"].iloc[0]), conc)] = t
    return out


def _layout(g: pd.DataFrame) -> tuple[int, int, int, str]:
    """(hosts, workers per host, servers, server hosts) of a group of cells; runs from before these
    columns were recorded had one worker per host and their servers on worker hosts."""
    workers = int(g["workers"].iloc[0])
    nodes = int(g["nodes"].iloc[0]) if "nodes" in g and pd.notna(g["nodes"].iloc[0]) else workers
    per_node = (
        int(g["workers_per_node"].iloc[0]) if "workers_per_node" in g and pd.notna(g["workers_per_node"].iloc[0]) else 1
    )
    ps = g[g["servers"] > 0]
    hosts = ps["server_hosts"].dropna().astype(str) if "server_hosts" in ps else pd.Series([], dtype=str)
    where = next((h for h in hosts if h in ("dedicated", "colocated")), "colocated")
    return nodes, per_node, int(g["servers"].max()) or 1, where


def _intra_link(paths: list[Path]) -> Link:
    """The link between two ranks on one emulated host (loopback inside its namespace): inverted from
    an all-reduce commbench on loopback (`ddlbench commbench --workers 2`, no --testbed)."""
    fits = fit_commbench(read_commbench(paths))["allreduce"]
    w = max(fits)
    return link_from_allreduce(fits[w], w, "loopback (commbench)")


def _knob_sets(g: pd.DataFrame) -> list[tuple[list[str], dict]]:
    """(methods, knobs) to predict a group's cells with: the all-reduce methods once, the PS methods
    once per local_reduce value measured (0 = flat, 1 = hierarchical)."""
    methods = [m for m in METHODS if m in set(g["scheme"])]
    ps = [m for m in methods if m.endswith("-ps")]
    values = (
        sorted({int(v) for v in g.loc[g["scheme"].isin(ps), "knob_local_reduce"].dropna()})
        if "knob_local_reduce" in g
        else []
    )
    if not values:
        return [(methods, {})]
    out = [([m for m in methods if m not in ps], {})] if len(ps) < len(methods) else []
    return out + [(ps, {m: {"local_reduce": v} for m in ps}) for v in values]


def _networks(cells: pd.DataFrame, cb: dict, burst: float, intra_paths: list[Path] | None) -> dict:
    """(hosts, workers per host, network label) -> (Network, servers, server hosts), fitted from the
    commbench measured at one rank per host (the hosts' links) and, with > 1 worker per host, the
    loopback commbench (the link inside a host)."""
    out = {}
    for (workers, net), g in cells.groupby(["workers", "network"]):
        nodes, per_node, servers, where = _layout(g)
        rate = float(g["network_rate_mbit"].iloc[0])
        if (nodes, rate) not in cb:
            raise UserError(
                f"no commbench measured at {nodes} workers at {rate:g} Mbit/s ({net}): run "
                f"`ddlbench commbench --testbed --workers {nodes}` with the testbed at that rate"
            )
        layout = Cluster(nodes, 1, _ANY, _ANY, servers, server_hosts=where)
        link, ps_link, fits = links_from_commbench([cb[(nodes, rate)]], burst, layout, SERVER_GBYTE_S)
        intra = link
        if per_node > 1:
            if not intra_paths:
                raise UserError(
                    f"cells with {per_node} workers per host need the link inside a host: give "
                    f"--intra-commbench DIR from `ddlbench commbench --workers 2` (loopback)"
                )
            intra = _intra_link(intra_paths)
        out[(int(workers), net)] = Network(str(net), link, intra, fits, ps_link), nodes, per_node, servers, where
    return out


def predict_runs(
    runs: list,
    commbench: list[Path],
    profiles: list[Path],
    intra_commbench: list[Path] | None = None,
    variants: tuple = VARIANTS,
) -> dict[str, pd.DataFrame]:
    """variant -> validation table (validate()) over every measured cell of every run (run directories,
    or summary tables)."""
    cb = _commbench_index(commbench)
    prof = _profiles(profiles)
    burst = testbed_burst_bytes()
    measured = pd.concat([r if isinstance(r, pd.DataFrame) else load_run(r).summary for r in runs], ignore_index=True)
    cells = measured[(measured["status"] == "ok") & (measured["workers"] > 1)]
    networks = _networks(cells, cb, burst, intra_commbench)
    out: dict[str, list] = {v: [] for v in variants}
    cores = {i: run_cores(r) if not isinstance(r, pd.DataFrame) else None for i, r in enumerate(runs)}
    cores_of = next((c for c in cores.values() if c), None)
    for (workers, net, workload), g in cells.groupby(["workers", "network", "workload"]):
        network, nodes, per_node, servers, where = networks[(workers, net)]
        batch = int(g["batch_per_worker"].iloc[0])
        local = measured[
            (measured["scheme"] == "local")
            & (measured["workload"] == workload)
            & (measured["network"] == net)
            & (measured["status"] == "ok")
        ]
        if "run_id" in g and "run_id" in local:  # the 1-worker cell of the same run where it has one
            same = local[local["run_id"].isin(set(g["run_id"]))]
            local = same if len(same) else local
        share = host_share(g)
        sets = _knob_sets(g)
        # local_reduce identifies a cell only where PS cells are predicted per value of it
        keys = KEYS + (["knob_local_reduce"] if any(knobs for _, knobs in sets) else [])
        local_s = None if local.empty else float(local["iter_s_median"].iloc[0])
        for variant in variants:
            if variant in (SHARED, RUN_SCALED) and local_s is None:
                raise UserError(
                    f"{workload} on {net} has no 1-worker `local` cell to scale compute with ({variant}): sweep "
                    f"with the baseline on"
                )
            model = cell_compute(variant, prof, workload, batch, local_s, int(workers), per_node, share, cores_of)
            pred = pd.concat(
                [
                    predict_rows(
                        [model],
                        [network],
                        [nodes],
                        per_node,
                        methods,
                        servers=servers,
                        knobs=knobs,
                        run_id=f"testbed-{variant}",
                        server_hosts=where,
                    )
                    for methods, knobs in sets
                ],
                ignore_index=True,
            )
            for k in keys:  # seq_len is None in an image workload's predicted rows, NaN in its measured
                if k in pred and k in g and pd.api.types.is_numeric_dtype(g[k]):
                    pred[k] = pd.to_numeric(pred[k])
            v = validate(pred, g, keys)
            v["hosts"] = nodes
            v["workers_per_host"] = per_node
            v["rate_mbit"] = float(g["network_rate_mbit"].iloc[0])
            v["measured_cv"] = _column(v, g, keys, "iter_s_cv")
            v["measured_comm_only_s"] = _column(v, g, keys, "comm_only_s")
            v["predicted_comm_only_s"] = _column(v, pred, keys, "comm_only_s")
            v["predicted_compute_s"] = model.iteration_s
            out[variant].append(v)
    tables = {}
    for variant, parts in out.items():
        t = pd.concat(parts, ignore_index=True)
        t.attrs["median_ape_pct"] = float(t["ape_pct"].median())
        tables[variant] = t
    return tables


def _column(v: pd.DataFrame, rows: pd.DataFrame, keys: list[str], col: str):
    """`col` of the row of `rows` that matches each validated cell on `keys`."""
    on = [k for k in keys if k in rows]
    right = rows[[*on, col]].drop_duplicates(on)
    left = v[on].copy()
    for k in on:  # seq_len: NaN (float) for an image workload on one side, None (object) on the other
        if pd.api.types.is_numeric_dtype(left[k]) != pd.api.types.is_numeric_dtype(right[k]):
            left[k], right[k] = pd.to_numeric(left[k]), pd.to_numeric(right[k])
    return left.merge(right, how="left")[col].values


def cell_compute(
    variant: str,
    prof: dict,
    workload: str,
    batch: int,
    local_s: float | None,
    workers: int,
    per_node: int,
    share: float | None,
    cores: int | None,
):
    """The compute model of a cell of `workers` ranks (`per_node` a host) in one compute variant, for the testbed's
    validation and the own calibration's alike: VARIANTS as `variant_model`, SHARED as `shared_compute` (each host's
    ranks on its `share` where the hosts had one, else every rank on the machine's `cores`); a profile missing is
    refused in one line."""
    # the ranks that compete for one processor: every rank of the machine, or a host's own where it has a share
    competing = per_node if share else workers
    for conc in (1, competing):
        if (workload, conc) not in prof:
            raise UserError(
                f"no profile of {workload} measured with --concurrent {conc}: run `ddlbench profile {workload} "
                f"--batch {batch} --concurrent {conc}`"
            )
    if variant == SHARED:
        ranks, on = (per_node, share) if share else (workers, cores)
        return shared_compute(compute_model(prof[(workload, 1)], batch=batch), local_s, ranks, on)
    if variant == HOST_SHARE:
        if not share:
            raise UserError(
                f"the {HOST_SHARE} compute variant needs hosts with a processor share (`testbed up --host-cpus`); "
                f"these cells ran without one"
            )
        alone = compute_model(prof[(workload, 1)], batch=batch)
        f = host_share_factor(per_node, share)
        return alone.scaled(f, device=f"{HOST_SHARE} x{f:.3f}")
    return variant_model(variant, prof, workload, competing, batch, local_s)


def variant_model(variant: str, prof: dict, workload: str, workers: int, batch: int, local_s: float | None):
    """The compute model of one of VARIANTS for a cell of `workers` ranks: `alone` the profile measured alone,
    `contended` the one measured beside as many copies as the cell has workers, RUN_SCALED that one scaled by the
    run's 1-worker cell (its iteration, `local_s`) over the profile alone. `prof`: (workload, concurrent) -> profile
    table."""
    model = compute_model(prof[(workload, 1 if variant == "alone" else workers)], batch=batch)
    if variant != RUN_SCALED:
        return model
    alone = compute_model(prof[(workload, 1)], batch=batch)
    factor = local_s / alone.iteration_s
    return model.scaled(factor, device=f"{RUN_SCALED} x{factor:.3f}")


def summary_lines(t: pd.DataFrame) -> list[str]:
    lines = ["| hosts x workers | rate | cells | median APE % | max APE % |", "|---:|---:|---:|---:|---:|"]
    for (h, w, r), g in t.groupby(["hosts", "workers_per_host", "rate_mbit"]):
        lines.append(
            f"| {h} x {w} | {r:g} Mbit/s | {len(g)} | {g['ape_pct'].median():.1f} | {g['ape_pct'].max():.1f} |"
        )
    if "knob_local_reduce" in t and t["knob_local_reduce"].notna().any():
        lines += [
            "",
            "| PS method | local_reduce | cells | median APE % | median signed % |",
            "|---|---:|---:|---:|---:|",
        ]
        for (m, lr), g in t.dropna(subset=["knob_local_reduce"]).groupby(["scheme", "knob_local_reduce"]):
            lines.append(
                f"| {m} | {int(lr)} | {len(g)} | {g['ape_pct'].median():.1f} | {g['signed_error_pct'].median():+.1f} |"
            )
    lines += ["", "| method | cells | median APE % | median signed % |", "|---|---:|---:|---:|"]
    for m in METHODS:
        g = t[t["scheme"] == m]
        if len(g):
            lines.append(f"| {m} | {len(g)} | {g['ape_pct'].median():.1f} | {g['signed_error_pct'].median():+.1f} |")
    return lines


def run(runs, commbench, profiles, out: Path, intra_commbench=None) -> dict[str, pd.DataFrame]:
    out.mkdir(parents=True, exist_ok=True)
    tables = predict_runs(runs, commbench, profiles, intra_commbench)
    text = []
    for variant, t in tables.items():
        write_parquet_atomic(t, out / f"validation-{variant}.parquet")
        save(
            validation_scatter(t, f"emulated testbed, compute {variant}: median APE {t.attrs['median_ape_pct']:.1f} %"),
            out / f"predicted-vs-measured-{variant}.png",
        )
        text += [f"## compute {variant}: median APE {t.attrs['median_ape_pct']:.1f} % over {len(t)} cells", ""]
        text += [*summary_lines(t), "", format_validation(t), ""]
    (out / "validation.md").write_text("\n".join(text) + "\n")
    return tables


def report_parser(prog: str, run_help: str, commbench_help: str, profile_help: str) -> argparse.ArgumentParser:
    """The arguments of a predicted-beside-measured report (experiments/testbed_validation/run.py,
    experiments/beyond/run.py): the measured runs, the commbench runs and profiles the prediction is made from, the
    report directory.
    The help texts say which runs and tables the calling script needs."""
    ap = argparse.ArgumentParser(prog=prog)
    ap.add_argument("--run", type=Path, action="append", required=True, help=run_help)
    ap.add_argument("--commbench", type=Path, action="append", required=True, help=commbench_help)
    ap.add_argument("--profile", type=Path, action="append", required=True, help=profile_help)
    ap.add_argument("--out", type=Path, required=True, help="report directory")
    return ap
