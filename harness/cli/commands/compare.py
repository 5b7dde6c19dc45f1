"""`ddlbench compare BASELINE CURRENT...`: the regression gate (harness/gate/compare.py decides).

    ddlbench compare cpu-tiny results/<run-id>              # a stored baseline (1 or more runs) vs a run
    ddlbench compare cpu-tiny results/today-1 results/today-2   # several runs of the sweep: rounds
    ddlbench compare results/<old> results/<new> --factor 1.05
    ddlbench compare --history history/ results/<run-id>      # each cell against its latest stable segment
    ddlbench compare --history history/ results/<run-id> --blind-above 10% --fail-on blind

With --history DIR there is no BASELINE: every argument is a current run, judged against its cells' series
in the history folder (harness/history/against.py).

Prints a Markdown table (also appended to $GITHUB_STEP_SUMMARY when set). Exit status 1 when any cell
is worse or failed, 0 otherwise, 2 on a usage error (including unlike environments).
"""

from __future__ import annotations

import os

import click

from harness.cli.options import history_option
from harness.core.errors import UserError


def run_compare(
    baseline: str, current, cfg, allow_env_mismatch: bool = False, baselines_dir: str | None = None
) -> tuple[str, int]:
    """Load both sides (a stored baseline brings all its runs), check environments, decide; returns
    (markdown, exit status)."""

    # lazy: what runs the command, not what declares it (docs/ARCHITECTURE.md, "Commands")
    from harness.gate.baselines import load_rounds, resolve, run_identity
    from harness.gate.comparable import check_environments
    from harness.gate.compare import compare_rounds, compared_backends, gate_exit_code
    from harness.gate.markdown import to_markdown

    currents = [current] if isinstance(current, str) else list(current)
    base = load_rounds(resolve(baseline, baselines_dir))
    cur = [t for c in currents for t in load_rounds(resolve(c, baselines_dir))]
    ids = [run_identity(t) for t in cur]
    if len(set(ids)) < len(ids) or set(ids) & {run_identity(t) for t in base}:
        raise UserError(
            "the same run was given twice: each run of the sweep counts once, on one side; give "
            "separate runs (e.g. results/today-1 results/today-2)"
        )
    backends = compared_backends(base[0].summary, cur[0].summary)
    notes = {check_environments(base[0].environment, c.environment, backends, allow_env_mismatch) for c in cur}
    table = compare_rounds([(t.summary, t.raw) for t in base], [(t.summary, t.raw) for t in cur], cfg)
    names = cur[0].path.name + (f" (+{len(cur) - 1} runs)" if len(cur) > 1 else "")
    md = to_markdown(table, cfg, title=f"ddlbench compare {base[0].path.name} -> {names}")
    md += "\n" + "\n".join(f"{n}." for n in sorted(notes)) + "\n"
    return md, gate_exit_code(table)


def run_compare_history(
    history, currents, cfg, fail_on: str, baselines_dir: str | None = None, blind_above: float | None = None
) -> tuple[str, int]:
    """The current runs against the history folder's series (harness/history/against.py)."""

    # lazy: what runs the command, not what declares it (docs/ARCHITECTURE.md, "Commands")
    from harness.gate.baselines import load_rounds, resolve
    from harness.history.against import compare_history

    runs = [t for c in currents for t in load_rounds(resolve(c, baselines_dir))]
    return compare_history(history, runs, cfg, fail_on, blind_above=blind_above)


def parse_step(ctx, param, value):
    """--blind-above: a step as a percentage ("10%") or a fraction ("0.10"), above 0 and below 100%."""
    if value is None:
        return None
    text = value.strip()
    try:
        step = float(text[:-1]) / 100 if text.endswith("%") else float(text)
    except ValueError:
        raise click.BadParameter(
            f"{value!r} is not a step: give a percentage, e.g. 10% (or the fraction 0.10)"
        ) from None
    if not 0 < step < 1:
        raise click.BadParameter(
            f"{value!r} is not a step between 0 and 100%: give e.g. 10% (a bare number is a fraction: 0.10)"
        )
    return step


@click.command("compare")
@click.argument("runs", nargs=-1, required=True, metavar="[BASELINE] CURRENT...")
@click.option(
    "--factor",
    type=click.FloatRange(min=1.0, min_open=True),
    default=1.10,
    show_default=True,
    help="A change counts only beyond this ratio of median throughputs.",
)
@click.option(
    "--alpha",
    type=click.FloatRange(0.0, 1.0, min_open=True, max_open=True),
    default=0.05,
    show_default=True,
    help="Significance level: of the whole gate over several runs (each cell's moderated t at "
    "alpha / cells), or of Mann-Whitney U on iterations with one run a side.",
)
@click.option(
    "--min-samples",
    type=click.IntRange(min=2),
    default=6,
    show_default=True,
    help="Fewest samples per side for Mann-Whitney U; below, non-overlapping 99% CIs decide.",
)
@click.option(
    "--allow-env-mismatch",
    is_flag=True,
    help="Compare even when the environments differ (machine, python/torch, the compared cells' backend libraries).",
)
@click.option(
    "--baselines-dir",
    type=click.Path(file_okay=False),
    default=None,
    help="Where stored baselines live (default $DDLBENCH_BASELINES or results/baselines).",
)
@history_option(more=": judge the current runs against their cells' series there, with no BASELINE")
@click.option(
    "--fail-on",
    type=click.Choice(["worse", "confirmed", "blind"]),
    default="worse",
    show_default=True,
    help="With --history: also fail (exit 1) on an open confirmed change in a compared cell's series "
    "(confirmed), or on a compared cell whose detectable step is above --blind-above (blind).",
)
@click.option(
    "--blind-above",
    callback=parse_step,
    metavar="STEP",
    help="With --history: a warning line for every compared cell whose detectable step (the smallest slowdown "
    "the detector would find at its noise and length) is above STEP, e.g. 10%; an error with --fail-on blind.",
)
@click.pass_context
def command(ctx, runs, factor, alpha, min_samples, allow_env_mismatch, baselines_dir, history, fail_on, blind_above):
    """Compare CURRENT against BASELINE (each a run directory or a stored baseline name), or with --history
    DIR every CURRENT against its cells' latest stable segment in that history folder.

    Give several CURRENT runs of the sweep (and a baseline saved from several) and the gate judges each
    cell against its run-to-run spread. Exit status 1 if any cell is worse or failed, else 0."""

    # lazy: what runs the command, not what declares it (docs/ARCHITECTURE.md, "Commands")
    from harness.gate.compare import GateConfig

    cfg = GateConfig(factor=factor, alpha=alpha, min_samples=min_samples)
    if history is not None:
        md, code = run_compare_history(history, runs, cfg, fail_on, baselines_dir, blind_above)
    elif len(runs) < 2:
        raise UserError(
            "compare needs a BASELINE and at least one CURRENT run (or --history DIR and the current "
            "runs): e.g. `ddlbench compare cpu-tiny results/<run-id>`"
        )
    elif fail_on != "worse" or blind_above is not None:
        what = "--blind-above" if fail_on == "worse" else f"--fail-on {fail_on}"
        raise UserError(f"{what} needs --history DIR: changes and detectable steps are found in a history folder")
    else:
        md, code = run_compare(runs[0], runs[1:], cfg, allow_env_mismatch, baselines_dir)
    click.echo(md)
    summary_file = os.environ.get("GITHUB_STEP_SUMMARY")
    if summary_file:
        with open(summary_file, "a", encoding="utf-8") as f:
            f.write(md + "\n")
    ctx.exit(code)
