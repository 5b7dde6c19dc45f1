"""ddlbench's own stacks calibrated on the emulated testbed and checked on host counts held back
(reports/own-calibration/; the logic: experiments/own_calibration/validation.py). The inputs, on a quiet machine
(about 65 min for two rounds, as root), from the repository's root; the regime of issue 60: one worker per host,
each host a processor share of its own:

    ROUNDS=2 bash experiments/own_calibration/measure.sh IN   # S2 S3 S4, S2-r2 S3-r2 S4-r2, profiles, commbench
    python -m experiments.own_calibration.run --fit IN/S2 IN/S2-r2 --held IN/S3 IN/S3-r2 IN/S4 IN/S4-r2 \
        --profile IN/profile-*.parquet --commbench IN/CB-3h-* IN/CB-4h-* --out reports/own-calibration/share/report

The rounds of one sweep file are read pooled (harness/predict/rounds.py).

The fit reads only the two-host run (its 1-worker cells are the one-host measurement) and the profiles; the
held-back cells are predicted from the fitted parameters and compared. `--commbench` (commbench at the held-back
scale) feeds the uncalibrated predictor the report puts beside it (experiments/testbed_validation/validation.py).
Issue 51's regime (a one-host run of 2 workers, hosts sharing the machine's cores) runs the same way with
`--fit IN/S1 IN/S2 --held IN/S3` on reports/own-calibration/inputs.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from experiments.own_calibration.validation import run
from harness.core.errors import UserError
from harness.predict.rounds import pooled_sources, round_spread


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m experiments.own_calibration.run")
    ap.add_argument(
        "--fit", type=Path, action="extend", nargs="+", required=True, help="run directory fitted (1 and 2 hosts)"
    )
    ap.add_argument(
        "--held", type=Path, action="extend", nargs="+", required=True, help="run directory held back and predicted"
    )
    ap.add_argument("--profile", type=Path, action="extend", nargs="+", required=True, help="`ddlbench profile` table")
    ap.add_argument(
        "--commbench", type=Path, action="extend", nargs="+", default=[], help="commbench at the held-back scale"
    )
    ap.add_argument("--samples", type=int, default=32, help="bootstrap draws behind each cell's interval")
    ap.add_argument("--out", type=Path, required=True, help="report directory")
    a = ap.parse_args(argv)
    try:
        # a sweep given in several rounds (measure.sh's S2 S2-r2 ...) is read as its rounds pooled
        spread = round_spread([*a.fit, *a.held])
        fit, held = pooled_sources(a.fit), pooled_sources(a.held)
        results = run(fit, held, a.profile, a.commbench, a.out, a.samples, spread=spread)
    except UserError as e:
        raise SystemExit(f"error: {e}") from None
    for variant, (_cal, t, b) in results.items():
        before = f"; uncalibrated {b.attrs['median_ape_pct']:.1f} %" if b is not None else ""
        print(
            f"compute {variant}: calibrated median APE {t.attrs['median_ape_pct']:.1f} % over {len(t)} cells, "
            f"{t.attrs['inside_pct']:.0f} % inside{before}"
        )
    print(f"wrote {a.out / 'validation.md'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
