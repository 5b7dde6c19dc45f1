"""`ddlbench advise`: which method and knobs to use for this workload on this placement, with evidence
(the workflow: harness/advise/workflow.py).

    ddlbench advise --workload bert-base-tiny --workers 2                   # this box
    ddlbench advise --workload mypkg.models:build --workers 2 --testbed     # the emulated hosts that are up
    ddlbench advise --workload bert-base --workers 16                        # inside a Slurm allocation
"""

from __future__ import annotations

from pathlib import Path

import click

from harness.cli.options import output_option, servers_option
from harness.cli.runs_cells import RunsCells


@click.command("advise", cls=RunsCells, go_on="go on with the same command and --resume --output {run_dir}")
@click.option("--workload", required=True, help="Workload name, or your own as package.module:function.")
@click.option("--workers", default=2, show_default=True, type=int, help="Worker processes.")
@servers_option("; advise's PS candidates try 1 to that many")
@click.option("--testbed", is_flag=True, help="Measure on the emulated testbed that is up (`ddlbench testbed up`).")
@click.option("--schemes", default="all", show_default=True, help="Methods to consider, comma-separated, or all.")
@click.option(
    "--grid",
    type=click.Choice(["full", "default"]),
    default="full",
    show_default=True,
    help="Each method over its declared knob grid, or at its default knobs only.",
)
@click.option(
    "--top-k",
    default=6,
    show_default=True,
    type=int,
    help="Best predicted candidates to measure (DDP with default knobs is measured besides).",
)
@click.option("--iters", default=20, show_default=True, type=int, help="Measured iterations of a first try.")
@click.option("--max-iters", default=200, show_default=True, type=int, help="Bound on the iterations of one try.")
@click.option(
    "--target-ci",
    default=0.03,
    show_default=True,
    type=float,
    help="Wanted half width of the 95% CI of the mean iteration time, relative.",
)
@click.option(
    "--rounds",
    default=3,
    show_default=True,
    type=int,
    help="Alternated rounds of the best two when their CIs overlap (0 = none).",
)
@click.option("--warmup", default=5, show_default=True, type=int, help="Discarded iterations per cell.")
@click.option("--batch", type=int, help="Per-worker batch (default: the workload's).")
@click.option("--seq-len", type=int, help="Sequence length (default: the workload's).")
@click.option("--device", default="auto", show_default=True, help="cpu | cuda | auto.")
@click.option(
    "--budget",
    default="10m",
    show_default=True,  # harness/advise/budget.DEFAULT_BUDGET
    help="Time advise may take in all (90s, 10m, 1h): the best candidates measured first, each try sized "
    "to the time left; when it ends, the answer with the confidence reached and what was left out.",
)
@click.option("--timeout", "timeout_s", default=600.0, show_default=True, type=float, help="Cell time limit, s.")
@click.option(
    "--profile",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Stored profile (`ddlbench profile`) instead of measuring one.",
)
@click.option(
    "--commbench",
    multiple=True,
    type=click.Path(path_type=Path),
    help="Stored commbench run(s) measured on this placement instead of measuring the network.",
)
@click.option(
    "--link", help="A link preset between the hosts (`ddlbench predict --link`) instead of measuring the network."
)
@click.option(
    "--calibrate",
    multiple=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="A run directory of `ddlbench sweep` with the methods on one node (then optionally one on two nodes): "
    "calibrate ddlbench's own stacks from it before predicting the candidates (`ddlbench predict --calibrate`).",
)
@output_option()
@click.option("--resume", is_flag=True, help="Go on with the advise run in --output: measure only what is missing.")
@click.option("--oversubscribe", is_flag=True, help="Allow more workers than cores (timings are then noise).")
@click.option("--no-progress", is_flag=True, help="No progress bars.")
def command(grid, iters, max_iters, target_ci, rounds, budget, no_progress, **options):
    """Recommend a method and knobs for WORKLOAD here: predict every candidate, measure the best few and DDP.

    Prints the recommendation (gain over DDP default with its 95% CI, or a statistical tie) and writes
    RUN/advise/report.md. Exit status 0, 2 on bad input, 128+N when signal N stopped it (go on with the
    same command and --resume --output RUN)."""
    # lazy: what runs the command, not what declares it (docs/ARCHITECTURE.md, "Commands")
    from harness.advise.budget import parse_duration
    from harness.advise.shortlist import Policy
    from harness.advise.workflow import AdviseSpec, run_advise

    spec = AdviseSpec(
        **options,
        full_grid=grid == "full",
        policy=Policy(iters, max_iters, target_ci, rounds),
        budget_s=parse_duration(budget),
        progress=not no_progress,
    )
    run_dir, line = run_advise(spec)
    click.echo((run_dir / "advise" / "report.md").read_text())
    click.echo(line)
    click.echo(f"report: {run_dir / 'advise' / 'report.md'}")
