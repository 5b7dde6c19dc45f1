"""Validate the predictor on the emulated testbed (issue 8): predict every cell of
testbed sweeps (2 and 3 hosts, two link rates, every method that runs) from inputs measured apart
from those cells, and compare cell by cell (the logic: experiments/testbed_validation/validation.py). Run from
the repository's root:

    ddlbench sweep sweeps/testbed-study-2host.yaml --output S2      # and -3host.yaml -> S3
    ddlbench testbed up --hosts 2 --rate 200mbit
    ddlbench commbench --testbed --workers 2 --min-size 4K --max-size 32M --output CB-2h-200mbit
    ...                                                            # each (hosts, rate) of the sweeps
    ddlbench profile bert-base-tiny --batch 8 -o prof-bert-1.parquet
    ddlbench profile bert-base-tiny --batch 8 --concurrent 2 -o prof-bert-2.parquet     # and 3
    python -m experiments.testbed_validation.run --run S2 --run S3 --commbench CB-2h-200mbit ... \
        --profile prof-bert-1.parquet ... --out reports/study-prediction/testbed

The hierarchical parameter server at 2 hosts x 2 workers (issue 16: `local_reduce` 0 and 1, a dedicated
server host, against bsp-a2a and DDP), from the cells of sweeps/testbed-ps.yaml (about 35 min in all on a
quiet machine: the sweep ~20 min, the commbench runs ~10, the profiles ~3):

    ddlbench sweep sweeps/testbed-ps.yaml --output SPS
    for r in 200mbit 1gbit; do
      ddlbench testbed up --hosts 3 --rate $r
      ddlbench commbench --testbed --workers 2 --min-size 4K --max-size 32M --output CB-ps-$r
      ddlbench commbench --testbed --workers 2 --collective pushpull --servers 1 --min-size 4K \
          --max-size 32M --output CB-ps-$r
    done
    ddlbench testbed down
    ddlbench commbench --workers 2 --min-size 4K --max-size 32M --output CB-loopback   # inside a host
    ddlbench profile bert-base-tiny --batch 2 -o prof-bb2-1.parquet
    ddlbench profile bert-base-tiny --batch 2 --concurrent 4 -o prof-bb2-4.parquet
    python -m experiments.testbed_validation.run --run SPS --commbench CB-ps-200mbit --commbench CB-ps-1gbit \
        --intra-commbench CB-loopback --profile prof-bb2-1.parquet --profile prof-bb2-4.parquet \
        --out reports/study-prediction/testbed-ps

Each cell is predicted on its own layout (hosts, workers per host, servers and where they sit, as the
summary records them) and, for PS cells, with its own `local_reduce`.

Inputs, none of them taken from the cells being predicted:
- network: `ddlbench commbench --testbed` with one rank per host at the cell's host count and rate
  (the hosts' links), and with more than one worker per host `ddlbench commbench` on loopback (the
  link between the ranks of one host); fitted for the tbf token
  buckets (`links_from_commbench(..., burst_bytes)`: alpha = mean small-message time, beta past the
  bucket); parameter servers where the cells had them (`server_hosts`; runs that did not record it
  had them on worker hosts), their link fitted to `commbench --collective pushpull` on the same
  layout when the run has push-pull rows (else the all-reduce link);
- compute: `ddlbench profile` of each workload at the sweep's batch, in three variants:
  `contended`: measured while as many copies compute as the cell has workers (the emulated hosts share
  this machine's cores, which a real cluster's would not);
  `run-scaled`: the contended profile scaled by the sweep's own 1-worker `local` cell over the profile
  measured alone (the "one measured single-device throughput" of docs/ARCHITECTURE.md: it carries the speed
  this shared VM had while the sweep ran, which drifts by tens of percent over an hour);
  `alone`: the profile measured as the only process (ignores that the hosts share 2 cores).
"""

from __future__ import annotations

from pathlib import Path

from experiments.testbed_validation.validation import report_parser, run
from harness.core.errors import UserError


def main(argv=None) -> int:
    ap = report_parser(
        "python -m experiments.testbed_validation.run",
        "testbed sweep run directory",
        "`ddlbench commbench --testbed` run directory (one per hosts x rate)",
        "`ddlbench profile` table (alone, and --concurrent N for N hosts)",
    )
    ap.add_argument(
        "--intra-commbench",
        type=Path,
        action="append",
        help="`ddlbench commbench --workers 2` on loopback: the link between ranks on one host "
        "(needed for cells with more than one worker per host)",
    )
    a = ap.parse_args(argv)
    try:
        tables = run(a.run, a.commbench, a.profile, a.out, a.intra_commbench)
    except UserError as e:
        raise SystemExit(f"error: {e}") from None
    for variant, t in tables.items():
        print(f"compute {variant}: median APE {t.attrs['median_ape_pct']:.1f} % over {len(t)} cells")
    print(f"wrote {a.out / 'validation.md'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
