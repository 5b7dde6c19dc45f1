"""`ddlbench baseline save NAME RUN` / `ddlbench baseline list`: named baselines for the gate.

Stored under results/baselines/NAME/ (or --dir, or $DDLBENCH_BASELINES); see harness/gate/baselines.py.
"""

from __future__ import annotations

import click

_DIR = click.option(
    "--dir",
    "root",
    type=click.Path(),
    default=None,
    help="Baselines directory (default $DDLBENCH_BASELINES or results/baselines).",
)


@click.group("baseline")
def command() -> None:
    """Save and list stored baselines for `ddlbench compare`."""


@command.command("save")
@click.argument("name")
@click.argument("runs", nargs=-1, required=True)
@click.option(
    "--force",
    is_flag=True,
    help="Replace an existing baseline of that name, or store a run measured on a busy machine.",
)
@_DIR
def save(name: str, runs: tuple[str, ...], force: bool, root: str | None) -> None:
    """Store RUNS (run directories or run ids) as baseline NAME (letters, digits, - and _).

    Give several runs of one sweep (3 or more) and `compare` knows each cell's run-to-run spread."""

    # lazy: what runs the command, not what declares it (docs/ARCHITECTURE.md, "Commands")
    from harness.gate.baselines import save_baseline

    dest = save_baseline(name, list(runs), root, force)
    n = f" ({len(runs)} runs)" if len(runs) > 1 else " (1 run: the gate will not know the run-to-run spread)"
    click.echo(f"saved baseline {name}{n} -> {dest}")


@command.command("list")
@_DIR
def list_(root: str | None) -> None:
    """Show stored baselines: name, date, environment fingerprint, cells."""

    # lazy: what runs the command, not what declares it (docs/ARCHITECTURE.md, "Commands")
    from harness.gate.baselines import baselines_root, list_baselines

    rows = list_baselines(root)
    if not rows:
        click.echo(f"no baselines in {baselines_root(root)} (save one with `ddlbench baseline save NAME RUN`)")
        return
    click.echo(f"{'name':<20} {'saved (UTC)':<26} {'fingerprint':<14} {'cells ok/all':<13} {'runs':<5} source run")
    for m in rows:
        cells = f"{m.get('cells_ok', '?')}/{m.get('cells', '?')}"
        click.echo(
            f"{m['name']:<20} {m.get('created_utc', '?'):<26} {m.get('fingerprint', '?'):<14} "
            f"{cells:<13} {m.get('rounds', 1)!s:<5} {m.get('source_run', '?')}"
        )
