"""`ddlbench doctor`: the first thing to run on a new GPU box or cluster before a long sbatch job. Reports
what this machine offers, then runs one tiny cell per usable backend x scheme (harness/doctor/)."""

from __future__ import annotations

import contextlib
import json
import sys
from pathlib import Path

import click

from harness.cli.runs_cells import RunsCells


@click.command("doctor", cls=RunsCells, show_run=False)
@click.option("--quick", is_flag=True, help="Only one smoke cell per backend (under a minute on 2 cores).")
@click.option("--no-cells", is_flag=True, help="Facts only: run no smoke cell.")
@click.option("--workload", default="bert-base-tiny", show_default=True, help="Workload of the smoke cells.")
@click.option("--device", default="auto", show_default=True, help="cpu | cuda | auto.")
@click.option(
    "--timeout",
    "timeout_s",
    type=float,
    help="Limit of one smoke cell, seconds (default: the smoke cell's own, SmokeConfig.timeout_s in "
    "harness/doctor/smoke.py; raise it on a busy machine or for a big workload).",
)
@click.option("--keep", type=click.Path(path_type=Path), help="Keep the smoke run in this directory.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document instead of the report.")
@click.pass_context
def command(ctx, quick, no_cells, workload, device, timeout_s, keep, as_json):
    """Check this machine before a long job: torch/CUDA/NCCL, GPUs, network interfaces (and whether the
    hostname resolves to loopback), every backend and how it was built, Slurm, the testbed, then one tiny
    cell per usable backend x scheme, each ok or failed with its reason.

    Exit status 0 when every usable backend's smoke cells pass, 1 when one failed, 2 on bad options, 128+N
    when signal N stopped it."""
    # lazy: what runs the command, not what declares it (docs/ARCHITECTURE.md, "Commands")
    from harness.doctor.diagnose import diagnose

    limit = {} if timeout_s is None else {"timeout_s": timeout_s}
    # --json: stdout carries the document only; run_cells' progress bar and failure lines go to stderr
    with contextlib.redirect_stdout(sys.stderr) if as_json else contextlib.nullcontext():
        report = diagnose(workload, device, quick, not no_cells, keep, echo=None if as_json else click.echo, **limit)
    if as_json:
        click.echo(json.dumps(report, indent=2, default=str))
    ctx.exit(0 if report["ok"] else 1)
