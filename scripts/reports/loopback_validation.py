"""Validate the predictor against a sweep measured on this box (loopback, 1-2 workers on 2 shared
cores): predict the same cells from a measured profile of each workload plus measured alpha/beta,
and compare cell by cell.

    python scripts/reports/loopback_validation.py --run RUN_DIR --profile P1.parquet --profile P2.parquet \
        --commbench CB_RUN_DIR --commbench P2P.parquet --out reports/study-prediction/loopback

Two variants: `profile` (compute straight from the profiles) and `calibrated` (each profile scaled
to the sweep's own measured 1-worker `local` throughput: the one measured
single-device throughput). The noise floor is the spread of cells whose true time is the compute
alone (1 worker, all-reduce methods: no bytes move) around the sweep's `local` cell.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

from harness.core.atomic import write_parquet_atomic
from harness.predict.commbench_fit import links_from_commbench
from harness.predict.compute import compute_model
from harness.predict.predictor import Network, predict_rows, resolve_methods
from harness.report.prediction import save, validation_scatter
from harness.report.validation import format_validation, validate
from harness.results.store import load_run

NO_BYTES = ("bsp-a2a", "wfbp-a2a", "mgwfbp", "bytescheduler-a2a", "ddp")


def noise_floor(measured: pd.DataFrame) -> pd.DataFrame:
    """APE of 1-worker all-reduce cells against the same sweep's `local` cell (all the same compute)."""
    ok = measured[measured["status"] == "ok"]
    out = []
    for wl, g in ok.groupby("workload"):
        local = g[(g["scheme"] == "local") & (g["workers"] == 1)]
        if local.empty:
            continue
        t = float(local["iter_s_median"].iloc[0])
        for r in g[(g["workers"] == 1) & g["scheme"].isin(NO_BYTES)].itertuples():
            out.append(
                {
                    "workload": wl,
                    "scheme": r.scheme,
                    "local_iter_s": t,
                    "iter_s": r.iter_s_median,
                    "ape_pct": abs(r.iter_s_median - t) / t * 100,
                }
            )
    return pd.DataFrame(out)


def run(run_dir: Path, profiles: list[Path], commbench: list[Path], out: Path) -> dict:
    measured = load_run(run_dir).summary
    link, p2p, fits = links_from_commbench(commbench)
    net = Network("loopback", link, link, fits, p2p)
    tables = [pd.read_parquet(p) for p in profiles]
    methods = resolve_methods("all,local")
    variants = {}
    for variant in ("profile", "calibrated"):
        models = []
        for t in tables:
            m = compute_model(t)
            if variant == "calibrated":
                loc = measured[
                    (measured["scheme"] == "local")
                    & (measured["workload"] == m.workload)
                    & (measured["status"] == "ok")
                ]
                m = m.calibrated(
                    float(loc["throughput_median"].iloc[0]), int(loc["batch_per_worker"].iloc[0]), "calibrated-to-local"
                )
            models.append(m)
        pred = predict_rows(models, [net], [1], [1, 2], methods, servers=1, run_id=f"loopback-{variant}")
        write_parquet_atomic(pred, out / f"predicted-{variant}.parquet")
        variants[variant] = v = validate(pred, measured)
        save(
            validation_scatter(
                v, f"loopback, compute from the {variant}: median APE {v.attrs['median_ape_pct']:.1f} %"
            ),
            out / f"predicted-vs-measured-{variant}.png",
        )
    floor = noise_floor(measured)
    text = [
        f"all-reduce fit at 2 workers: alpha = {fits[2].alpha_s * 1e6:.0f} us, "
        f"beta = {fits[2].beta_s_per_byte * 1e9:.3f} ns/byte ({8 / fits[2].beta_s_per_byte / 1e9:.2f} Gbit/s); "
        + (f"point-to-point: {p2p.latency_s * 1e6:.0f} us + {p2p.rate_gbit_s:.2f} Gbit/s" if p2p else "")
    ]
    for variant, v in variants.items():
        how = "measured profile as is" if variant == "profile" else "profile scaled to the sweep local throughput"
        text += [
            f"\n### compute from the {variant} ({how})\n",
            format_validation(v),
        ]
    text += [
        "\n### noise floor: 1-worker cells that move no bytes vs the sweep's `local` cell\n",
        "| workload | method | local ms | cell ms | APE % |",
        "|---|---|---:|---:|---:|",
    ]
    for r in floor.itertuples():
        text.append(
            f"| {r.workload} | {r.scheme} | {r.local_iter_s * 1000:.1f} | {r.iter_s * 1000:.1f} | {r.ape_pct:.1f} |"
        )
    text.append(f"\nmedian noise-floor APE: {floor['ape_pct'].median():.1f} %")
    (out / "validation.md").write_text("\n".join(text) + "\n")
    return {"variants": variants, "floor": floor, "text": "\n".join(text)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python scripts/reports/loopback_validation.py")
    ap.add_argument("--run", type=Path, required=True)
    ap.add_argument("--profile", type=Path, action="append", required=True)
    ap.add_argument("--commbench", type=Path, action="append", required=True)
    ap.add_argument("--out", type=Path, required=True)
    a = ap.parse_args(argv)
    a.out.mkdir(parents=True, exist_ok=True)
    print(run(a.run, a.profile, a.commbench, a.out)["text"])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
