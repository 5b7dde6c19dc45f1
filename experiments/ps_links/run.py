"""Bytes through each host's link per iteration and throughput, from a run of sweeps/testbed-ps.yaml
(issue 16): the hierarchical parameter server (local_reduce 1) against the flat one (0), bsp-a2a and ddp (the
logic: experiments/ps_links/links.py). From the repository's root:

    ddlbench sweep sweeps/testbed-ps.yaml --output /tmp/testbed-ps --no-progress
    python -m experiments.ps_links.run /tmp/testbed-ps --out reports/testbed-ps

Reads the summary rows (`net_bytes_json`: the node's interface counters, read by one rank per host around
the loop, per iteration of warm-up and measurement; harness/results/netcheck.py) and each cell's
result.json (`dist.rank_hosts`: which emulated host each rank ran on). Writes README.md (the table, the
expectation beside it) and links.csv into --out.

Expectation for a PS cell with its servers on a host of their own: each worker host's link carries about
one gradient each way per iteration with local reduce (one copy pushed, one pulled per node), and about
one per worker on the host without (every worker pushes and pulls its own): 2 at 2 workers per host, 4 at
the study's 4. All-reduce rows have no such figure (it depends on gloo's algorithm); a ring over 4 ranks,
2 per host, moves 2(N-1)/N = 1.5 gradients each way through each host link.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from experiments.ps_links.links import link_rows, markdown
from harness.core.atomic import write_text_atomic
from harness.core.errors import UserError


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_dir", type=Path, help="run directory of sweeps/testbed-ps.yaml")
    ap.add_argument("--out", type=Path, default=Path("reports/testbed-ps"), help="report directory")
    args = ap.parse_args(argv)
    try:
        df = link_rows(args.run_dir)
    except UserError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    write_text_atomic(args.out / "links.csv", df.to_csv(index=False))
    text = markdown(df, args.run_dir)
    write_text_atomic(args.out / "README.md", text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
