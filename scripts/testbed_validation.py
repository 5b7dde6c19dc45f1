"""Validate the predictor on the emulated testbed (issue 8): predict every cell of
testbed sweeps (2 and 3 hosts, two link rates, every method that runs) from inputs measured apart
from those cells, and compare cell by cell.

    ddlbench sweep sweeps/testbed-study-2host.yaml --output S2      # and -3host.yaml -> S3
    ddlbench testbed up --hosts 2 --rate 200mbit
    ddlbench commbench --testbed --workers 2 --min-size 4K --max-size 32M --output CB-2h-200mbit
    ...                                                            # each (hosts, rate) of the sweeps
    ddlbench profile bert-base-tiny --batch 8 -o prof-bert-1.parquet
    ddlbench profile bert-base-tiny --batch 8 --concurrent 2 -o prof-bert-2.parquet     # and 3
    python scripts/testbed_validation.py --run S2 --run S3 --commbench CB-2h-200mbit ... \
        --profile prof-bert-1.parquet ... --out reports/study-prediction/testbed

Inputs, none of them taken from the cells being predicted:
- network: `ddlbench commbench --testbed` at the cell's host count and rate, fitted for the tbf token
  buckets (`links_from_commbench(..., burst_bytes)`: alpha = mean small-message time, beta past the
  bucket); parameter servers on the worker hosts (`server_hosts=colocated`, as the testbed places a
  server when it has no spare host), their link fitted to `commbench --collective pushpull` on the
  same layout when the run has push-pull rows (else the all-reduce link);
- compute: `ddlbench profile` of each workload at the sweep's batch, in three variants:
  `contended`: measured while as many copies compute as the cell has workers (the emulated hosts share
  this machine's cores, which a real cluster's would not);
  `calibrated`: the contended profile scaled by the sweep's own 1-worker `local` cell over the profile
  measured alone (the "one measured single-device throughput" of docs/ARCHITECTURE.md: it carries the speed
  this shared VM had while the sweep ran, which drifts by tens of percent over an hour);
  `alone`: the profile measured as the only process (ignores that the hosts share 2 cores).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

from harness.atomic import write_parquet_atomic
from harness.errors import UserError
from harness.predict.commbench_fit import links_from_commbench, read_commbench, testbed_burst_bytes
from harness.predict.compute import compute_model
from harness.predict.network import Cluster, Link
from harness.predict.predictor import Network, predict_rows
from harness.predict.ps_sim import SERVER_GBYTE_S
from harness.report.prediction import save, validation_scatter
from harness.report.validation import format_validation, validate
from harness.results.store import load_run
from harness.testbed.netns import parse_rate

METHODS = ["ddp", "bsp-a2a", "wfbp-a2a", "mgwfbp", "bytescheduler-a2a", "bsp-ps", "wfbp-ps", "bytescheduler-ps"]
VARIANTS = ("calibrated", "contended", "alone")
_ANY = Link("unused", 1.0, 0.0)  # a layout's links are not used when fitting the PS link


def _commbench_index(paths: list[Path]) -> dict[tuple[int, float], Path]:
    """(workers, link rate in Mbit/s) -> commbench run directory. `commbench --testbed` labels its rows
    with the testbed's rate (`emulated-200mbit`), whatever a sweep named that network profile."""
    out = {}
    for p in paths:
        df = read_commbench([p])
        for (w, net), _ in df.groupby(["workers", "network"]):
            if not str(net).startswith("emulated-"):
                raise UserError(f"{p} was not measured on the testbed (network {net!r}): measure with "
                                f"`ddlbench commbench --testbed`")
            out[(int(w), parse_rate(str(net)[len("emulated-"):]))] = p
    return out


def _profiles(paths: list[Path]) -> dict[tuple[str, int], pd.DataFrame]:
    """(workload, concurrent) -> profile table."""
    out = {}
    for p in paths:
        t = pd.read_parquet(p)
        conc = int(t["concurrent"].iloc[0]) if "concurrent" in t else 1
        out[(str(t["workload"].iloc[0]), conc)] = t
    return out


def predict_runs(runs: list[Path], commbench: list[Path], profiles: list[Path]) -> dict[str, pd.DataFrame]:
    """variant -> validation table (validate()) over every measured cell of every run."""
    cb = _commbench_index(commbench)
    prof = _profiles(profiles)
    burst = testbed_burst_bytes()
    measured = pd.concat([load_run(r).summary for r in runs], ignore_index=True)
    cells = measured[(measured["status"] == "ok") & (measured["workers"] > 1)]
    networks: dict[tuple, tuple[Network, int]] = {}  # (workers, network label) -> (fitted network, servers)
    for (workers, net), g in cells.groupby(["workers", "network"]):
        rate = float(g["network_rate_mbit"].iloc[0])
        key = (int(workers), rate)
        if key not in cb:
            raise UserError(f"no commbench measured at {workers} workers at {rate:g} Mbit/s ({net}): run "
                            f"`ddlbench commbench --testbed --workers {workers}` with the testbed at that rate")
        servers = int(g["servers"].max()) or 1
        layout = Cluster(int(workers), 1, _ANY, _ANY, servers, server_hosts="colocated")
        link, ps_link, fits = links_from_commbench([cb[key]], burst, layout, SERVER_GBYTE_S)
        networks[(workers, net)] = Network(str(net), link, link, fits, ps_link), servers
    out: dict[str, list] = {v: [] for v in VARIANTS}
    for (workers, net, workload), g in cells.groupby(["workers", "network", "workload"]):
        network, servers = networks[(workers, net)]
        batch = int(g["batch_per_worker"].iloc[0])
        for conc in (1, int(workers)):
            if (workload, conc) not in prof:
                raise UserError(f"no profile of {workload} measured with --concurrent {conc}: run `ddlbench "
                                f"profile {workload} --batch {batch} --concurrent {conc}`")
        local = measured[(measured["scheme"] == "local") & (measured["workload"] == workload)
                         & (measured["network"] == net) & (measured["status"] == "ok")]
        for variant in VARIANTS:
            model = compute_model(prof[(workload, 1 if variant == "alone" else int(workers))], batch=batch)
            if variant == "calibrated":
                if local.empty:
                    raise UserError(f"{workload} on {net} has no 1-worker `local` cell to calibrate with: "
                                    f"sweep with the baseline on")
                alone = compute_model(prof[(workload, 1)], batch=batch)
                factor = float(local["iter_s_median"].iloc[0]) / alone.iteration_s
                model = model.scaled(factor, device=f"calibrated x{factor:.3f}")
            methods = [m for m in METHODS if m in set(g["scheme"])]
            pred = predict_rows([model], [network], [int(workers)], 1, methods, servers=servers,
                                run_id=f"testbed-{variant}", server_hosts="colocated")
            v = validate(pred, g)
            v["hosts"] = int(workers)
            v["rate_mbit"] = float(g["network_rate_mbit"].iloc[0])
            v["measured_cv"] = v["scheme"].map(g.set_index("scheme")["iter_s_cv"])
            v["predicted_comm_only_s"] = v["scheme"].map(pred.set_index("scheme")["comm_only_s"])
            v["measured_comm_only_s"] = v["scheme"].map(g.set_index("scheme")["comm_only_s"])
            v["predicted_compute_s"] = model.iteration_s
            out[variant].append(v)
    tables = {}
    for variant, parts in out.items():
        t = pd.concat(parts, ignore_index=True)
        t.attrs["median_ape_pct"] = float(t["ape_pct"].median())
        tables[variant] = t
    return tables


def summary_lines(t: pd.DataFrame) -> list[str]:
    lines = ["| hosts | rate | cells | median APE % | max APE % |", "|---:|---:|---:|---:|---:|"]
    for (h, r), g in t.groupby(["hosts", "rate_mbit"]):
        lines.append(f"| {h} | {r:g} Mbit/s | {len(g)} | {g['ape_pct'].median():.1f} | {g['ape_pct'].max():.1f} |")
    lines += ["", "| method | cells | median APE % | median signed % |", "|---|---:|---:|---:|"]
    for m in METHODS:
        g = t[t["scheme"] == m]
        if len(g):
            lines.append(f"| {m} | {len(g)} | {g['ape_pct'].median():.1f} | {g['signed_error_pct'].median():+.1f} |")
    return lines


def run(runs, commbench, profiles, out: Path) -> dict[str, pd.DataFrame]:
    out.mkdir(parents=True, exist_ok=True)
    tables = predict_runs(runs, commbench, profiles)
    text = []
    for variant, t in tables.items():
        write_parquet_atomic(t, out / f"validation-{variant}.parquet")
        save(validation_scatter(t, f"emulated testbed, compute {variant}: median APE {t.attrs['median_ape_pct']:.1f} %"),
             out / f"predicted-vs-measured-{variant}.png")
        text += [f"## compute {variant}: median APE {t.attrs['median_ape_pct']:.1f} % over {len(t)} cells", ""]
        text += summary_lines(t) + ["", format_validation(t), ""]
    (out / "validation.md").write_text("\n".join(text) + "\n")
    return tables


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python scripts/testbed_validation.py")
    ap.add_argument("--run", type=Path, action="append", required=True, help="testbed sweep run directory")
    ap.add_argument("--commbench", type=Path, action="append", required=True,
                    help="`ddlbench commbench --testbed` run directory (one per hosts x rate)")
    ap.add_argument("--profile", type=Path, action="append", required=True,
                    help="`ddlbench profile` table (alone, and --concurrent N for N hosts)")
    ap.add_argument("--out", type=Path, required=True)
    a = ap.parse_args(argv)
    try:
        tables = run(a.run, a.commbench, a.profile, a.out)
    except UserError as e:
        raise SystemExit(f"error: {e}") from None
    for variant, t in tables.items():
        print(f"compute {variant}: median APE {t.attrs['median_ape_pct']:.1f} % over {len(t)} cells")
    print(f"wrote {a.out / 'validation.md'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
