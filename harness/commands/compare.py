"""`ddlbench compare BASELINE CURRENT`: the regression gate (asv's rule; harness/compare.py decides).

    ddlbench compare cpu-tiny results/<run-id>              # a stored baseline vs a run
    ddlbench compare results/<old> results/<new> --factor 1.05

Prints a Markdown table (also appended to $GITHUB_STEP_SUMMARY when set). Exit status 1 when any cell
is worse or failed, 0 otherwise, 2 on a usage error (including unlike environments).
"""

from __future__ import annotations

import os

import click

from harness.baselines import resolve
from harness.compare import GateConfig, compare_runs, compared_backends, gate_exit_code, to_markdown
from harness.compare_env import check_environments
from harness.results.store import load_run


def run_compare(baseline: str, current: str, cfg, allow_env_mismatch: bool = False,
                baselines_dir: str | None = None) -> tuple[str, int]:
    """Load both sides, check environments, decide; returns (markdown, exit status)."""

    b = load_run(resolve(baseline, baselines_dir))
    c = load_run(resolve(current, baselines_dir))
    backends = compared_backends(b.summary, c.summary)
    env_note = check_environments(b.environment, c.environment, backends, allow_env_mismatch)
    table = compare_runs(b.summary, b.raw, c.summary, c.raw, cfg)
    md = to_markdown(table, cfg, title=f"ddlbench compare {b.path.name} -> {c.path.name}")
    md += f"\n{env_note}.\n"
    return md, gate_exit_code(table)


@click.command("compare")
@click.argument("baseline")
@click.argument("current")
@click.option("--factor", type=click.FloatRange(min=1.0, min_open=True), default=1.10, show_default=True,
              help="A change counts only beyond this ratio of median throughputs.")
@click.option("--alpha", type=click.FloatRange(0.0, 1.0, min_open=True, max_open=True), default=0.05,
              show_default=True, help="Significance level of the Mann-Whitney U test.")
@click.option("--min-samples", type=click.IntRange(min=2), default=6, show_default=True,
              help="Fewest samples per side for Mann-Whitney U; below, non-overlapping 99% CIs decide.")
@click.option("--allow-env-mismatch", is_flag=True,
              help="Compare even when the environments differ (machine, python/torch, the compared "
              "cells' backend libraries).")
@click.option("--baselines-dir", type=click.Path(file_okay=False), default=None,
              help="Where stored baselines live (default $DDLBENCH_BASELINES or results/baselines).")
@click.pass_context
def command(ctx, baseline, current, factor, alpha, min_samples, allow_env_mismatch, baselines_dir):
    """Compare CURRENT against BASELINE (each a run directory or a stored baseline name).

    Exit status 1 if any cell is worse or failed, else 0."""

    cfg = GateConfig(factor=factor, alpha=alpha, min_samples=min_samples)
    md, code = run_compare(baseline, current, cfg, allow_env_mismatch, baselines_dir)
    click.echo(md)
    summary_file = os.environ.get("GITHUB_STEP_SUMMARY")
    if summary_file:
        with open(summary_file, "a", encoding="utf-8") as f:
            f.write(md + "\n")
    ctx.exit(code)
