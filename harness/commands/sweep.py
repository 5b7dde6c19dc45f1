"""`ddlbench sweep FILE.yaml`: a matrix of cells, with a progress bar, resumable."""

from __future__ import annotations

from pathlib import Path

import click

from harness.errors import UserError


def run_sweep(path: str | Path, output: Path | None = None, resume: bool = False,
              progress: bool = True, launcher: str | None = None, retry_failed: bool = False) -> Path:
    from harness.execute import run_cells
    from harness.results.store import new_run_id
    from harness.sweep import expand, load_sweep

    cfg = load_sweep(path)
    if resume and output is None:
        raise UserError("--resume needs --output RUN_DIR: the run directory of the interrupted sweep")
    if retry_failed and not resume:
        raise UserError("--retry-failed re-runs the failed cells of a run: give it with --resume --output RUN_DIR")
    if cfg.testbed or cfg.networks:
        from harness.testbed.sweep import run_on_testbed

        return run_on_testbed(cfg, output, resume, progress, retry_failed)
    from harness.launch.srun import choose_launcher

    launch = choose_launcher(launcher)  # srun inside a Slurm allocation, else local
    cells = expand(cfg, nodes_for=launch.nodes_for)
    run_dir = output or Path("results") / new_run_id(cfg.name)
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "sweep.yaml").write_text(Path(path).read_text())
    run_cells(cells, run_dir, run_dir.name, resume=resume, progress=progress, launcher=launch.launch,
              env_extra=launch.env_extra or None, retry_failed=retry_failed)
    return run_dir


@click.command("sweep")
@click.argument("sweep_file", type=click.Path(dir_okay=False))
@click.option("--output", type=click.Path(file_okay=False, path_type=Path),
              help="Run directory (default results/<run-id>).")
@click.option("--resume", is_flag=True, help="Run only the cells missing from --output.")
@click.option("--retry-failed", is_flag=True,
              help="With --resume: also run again the cells recorded as failed (measured cells stay).")
@click.option("--no-progress", is_flag=True, help="No progress bar (logs, CI).")
@click.option("--launcher", type=click.Choice(["local", "srun"]),
              help="How cells start: srun steps (default inside a Slurm allocation) or local processes.")
def command(sweep_file, output, resume, retry_failed, no_progress, launcher):
    """Run every cell of SWEEP_FILE and print the summary."""
    run_dir = run_sweep(sweep_file, output, resume, progress=not no_progress, launcher=launcher,
                        retry_failed=retry_failed)
    from harness.commands.show import print_summary
    from harness.results.store import load_run

    print_summary(load_run(run_dir).summary, title=str(run_dir))
    click.echo(f"results: {run_dir}")
