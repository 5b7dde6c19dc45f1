"""`ddlbench slurm`: submit a sweep to Slurm, follow its jobs, merge their results.

    ddlbench slurm submit sweep.yaml --nodes 4 --gpus-per-node 4 --partition gpu --output runs/r1
    ddlbench slurm status runs/r1            # or job ids; states from scontrol (no accounting needed)
    ddlbench slurm collect runs/r1 -o runs/r1-all

The work is done by harness/jobs/slurm.py; this module is the click commands over it.
"""

from __future__ import annotations

from pathlib import Path

import click

from harness.cli.options import append_history, history_option, output_option

# -------------------------------------------------------------------------------------------- CLI


@click.group("slurm")
def command():
    """Submit sweeps to Slurm, follow the jobs, merge their results."""


@command.command("submit")
@click.argument("sweep_file", type=click.Path(dir_okay=False))
@click.option("--nodes", type=int, required=True, help="Most nodes any job may use.")
@click.option(
    "--gpus-per-node", type=int, default=0, show_default=True, help="GPUs per node (one worker each); 0 runs on CPU."
)
@click.option("--tasks-per-node", type=int, help="Workers per node (default: one per GPU; on CPU 1).")
@click.option("--cpus-per-task", type=int, help="CPUs per worker (default: the sweep's threads).")
@click.option("--partition", help="Slurm partition (default: the cluster's).")
@click.option("--time", "time_", help="Time limit per job, Slurm format (default: sum of its cells' timeouts).")
@output_option("; each job writes a part below it", file_okay=False)
@click.option("--array", is_flag=True, help="One job array (one element per node count) instead of one job each.")
@click.option("--sbatch-arg", "sbatch_args", multiple=True, help="Extra sbatch option, e.g. --exclusive (repeatable).")
@click.option("--dry-run", is_flag=True, help="Write the job scripts but do not submit them.")
def submit_command(
    sweep_file,
    nodes,
    gpus_per_node,
    tasks_per_node,
    cpus_per_task,
    partition,
    time_,
    output,
    array,
    sbatch_args,
    dry_run,
):
    """Submit SWEEP_FILE: one job per node count its cells need; print the job ids."""
    # lazy: what runs the command, not what declares it (docs/ARCHITECTURE.md, "Commands")
    from harness.jobs.slurm import submit_sweep

    run_dir, jobs = submit_sweep(
        sweep_file,
        nodes=nodes,
        gpus_per_node=gpus_per_node,
        tasks_per_node=tasks_per_node,
        cpus_per_task=cpus_per_task,
        partition=partition,
        time=time_,
        output=output,
        array=array,
        sbatch_args=sbatch_args,
        dry_run=dry_run,
    )
    for j in jobs:
        click.echo(f"{j['job_id']}\t{j['nodes']} node(s)\tworkers {','.join(map(str, j['workers']))}\t{j['output']}")
    click.echo(f"run directory: {run_dir}  (follow: ddlbench slurm status {run_dir})")


@command.command("status")
@click.argument("targets", nargs=-1)
def status_command(targets):
    """State of jobs (ids, or run directories from submit; default: your ddlbench jobs)."""
    # lazy: what runs the command, not what declares it (docs/ARCHITECTURE.md, "Commands")
    from harness.jobs.slurm import status

    rows = status(targets)
    if not rows:
        click.echo("no ddlbench jobs in the queue")
    for r in rows:
        where = f"\t{r['output']}\tcells: {r['cells']}" if "output" in r else ""
        click.echo(f"{r['job_id']}\t{r['state']}{where}")


@command.command("collect")
@click.argument("runs", nargs=-1, required=True)
@click.option(
    "-o",
    "--output",
    type=click.Path(file_okay=False, path_type=Path),
    required=True,
    help="Merged run directory to write.",
)
@history_option()
def collect_command(runs, output, history):
    """Merge the cells of several run directories (e.g. one per job) into one run directory."""
    # lazy: what runs the command, not what declares it (docs/ARCHITECTURE.md, "Commands")
    from harness.jobs.slurm import collect
    from harness.report.console import print_summary
    from harness.results.store import load_run

    merged = collect(runs, output)
    print_summary(load_run(merged).summary, title=str(merged))
    click.echo(f"results: {merged}")
    append_history(history, merged)
