"""`ddlbench predict`: iteration time, throughput and scaling efficiency of every method at any scale,
from a per-layer profile (or FLOP counts and a device preset) and a network model."""

from __future__ import annotations

import time

import click

from harness.cli.options import servers_option
from harness.core.errors import UserError


@click.command("predict")
@click.option(
    "--profile",
    "profiles",
    multiple=True,
    type=click.Path(dir_okay=False),
    help="Profile table from `ddlbench profile` (repeatable).",
)
@click.option(
    "--workload",
    "workloads",
    multiple=True,
    help="Workload to predict from FLOP counts (needs --device-preset; repeatable).",
)
@click.option("--device-preset", help="Device preset for calibration (e.g. study-gpu).")
@click.option(
    "--throughput",
    "throughput_samples_per_s",
    type=float,
    help="Measured one-device throughput, samples/s (calibration).",
)
@click.option("--batch", type=int, help="Per-worker batch (default: the preset's or the profile's).")
@click.option(
    "--compute",
    type=click.Choice(["auto", "profile", "flops"]),
    default="auto",
    show_default=True,
    help="Per-layer times from the measured profile or from FLOP/byte counts (roofline).",
)
@click.option(
    "--link",
    "links",
    multiple=True,
    help="Link preset between nodes (repeatable): eth-10g, eth-25g, ib-100g, ipoib-100g, ...; ddlbench's "
    "own stacks run on it. Default ib-100g unless --cluster or --commbench is given.",
)
@click.option(
    "--cluster",
    "clusters",
    multiple=True,
    help="A whole cluster (repeatable): a registered one (the study's study-ib-100g, study-ipoib-100g, "
    "study-eth-10g: links, each method's 2019 software and knobs) or a cluster file (.toml: nodes, "
    "links, each method's framework and knobs; examples/cluster-25g.toml).",
)
@click.option(
    "--network",
    "network",
    hidden=True,
    help="Not a predict option: a run's interface profile (run, sweep). Use --link or --cluster.",
)
@click.option(
    "--intervals",
    default=0,
    show_default=True,
    type=click.IntRange(min=0),
    help="With clusters that state input ranges (study-*): sample them this many times for each row's "
    "pred_low/pred_high (10th/90th percentiles; 32 is the report's).",
)
@click.option(
    "--commbench",
    multiple=True,
    type=click.Path(),
    help="Measured communication (a commbench run directory or Parquet; repeatable): all-reduce "
    "rows fit alpha/beta, point-to-point rows the parameter-server link.",
)
@click.option("--label", help="Network label for --commbench rows (default commbench).")
@click.option("--intra", default="pcie3-x16", show_default=True, help="Link inside a node (pcie3-x16, nvlink2).")
@click.option("--nodes", default="1,2,4,8", show_default=True, help="Node counts, comma-separated.")
@click.option(
    "--gpus-per-node",
    "--workers-per-node",
    "gpus_per_node",
    help="Workers per node of the --link presets' nodes, comma-separated [default: 4]; a cluster's are its own.",
)
@servers_option()
@click.option(
    "--server-hosts",
    type=click.Choice(["dedicated", "colocated"]),
    default="dedicated",
    show_default=True,
    help="Servers on hosts of their own (the study), or on the worker hosts sharing their NICs "
    "(a testbed with no spare host).",
)
@click.option(
    "--testbed-shaping",
    "shaped",
    is_flag=True,
    help="The --commbench rows were measured on `ddlbench testbed`: model its tbf token buckets "
    "(small transfers after an idle spell pass unshaped).",
)
@click.option(
    "--schemes",
    default="all",
    show_default=True,
    help="Methods, comma-separated; `all`, or `study` for the study's seven.",
)
@click.option(
    "--allreduce",
    type=click.Choice(["ring", "hierarchical"]),
    default="ring",
    show_default=True,
    help="All-reduce model across nodes.",
)
@click.option("--knob", "knob_pairs", multiple=True, help="METHOD.NAME=VALUE, e.g. ddp.bucket_cap_mb=50.")
@click.option(
    "--validate",
    "against",
    type=click.Path(file_okay=False),
    help="A run directory: compare the predictions with its measured summary.",
)
@click.option("-o", "--output", type=click.Path(), help="Write the rows as Parquet.")
@click.option("--dtype", default="fp32", show_default=True, help="Compute dtype of the predicted cells: fp32 only.")
@click.option(
    "--calibrate",
    multiple=True,
    type=click.Path(),
    help="A one-node run directory of `ddlbench sweep` (the methods and each workload's 1-worker cell), then "
    "optionally a two-node one (or a two-node `ddlbench commbench` directory): fit ddlbench's own stacks (hook, "
    "launch, copy, processor sharing, servers) and the two-node network, then predict on it (or on --link, "
    "--commbench, a cluster file). With --cluster study-*: the study's one-node table (gpus 1 and 4), then its "
    "two-node one (gpus 8).",
)
def command(knob_pairs, network, **options):
    """Predict iteration time, throughput and scaling efficiency of each method at any scale."""
    if network is not None:  # one meaning per option (docs/ARCHITECTURE.md, "Glossary": network, link, cluster)
        raise UserError(
            f"predict has no --network (a run's interface profile, `ddlbench run --network`): give "
            f"--link {network} for a link preset or --cluster {network} for a whole cluster"
        )
    # lazy: what runs the command, not what declares it (docs/ARCHITECTURE.md, "Commands")
    import harness.study  # noqa: F401 - the study's wing registers its clusters (study-*) with the predictor
    from harness.predict.request import PredictSpec, parse_method_knobs, run_predict
    from harness.report.validation import format_validation, validate
    from harness.results.store import load_run

    spec = PredictSpec(**options, knobs=parse_method_knobs(knob_pairs))
    t0, c0 = time.perf_counter(), time.process_time()
    df = run_predict(spec)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    for r in df.attrs.get("calibration", []):
        kept = "" if r["determined"] else " (not determined by one node: its sourced range kept)"
        click.echo(
            f"fitted {r['parameter']} = {r['value']:.4g} {r['unit']} [{r['low']:.4g}, {r['high']:.4g}]; "
            f"sourced {r['sourced_value']:.4g} [{r['sourced_low']:.4g}, {r['sourced_high']:.4g}]{kept}"
        )
    if df.attrs.get("uncalibrated"):
        click.echo(
            f"not calibrated: {', '.join(df.attrs['uncalibrated'])} (the calibration covers ddp and the seven "
            f"methods); predicted with their stacks as stated"
        )
    cols = [
        "workload",
        "network",
        "nodes",
        "workers",
        "scheme",
        "iter_s_median",
        "throughput_median",
        "scaling_efficiency",
        "exposed_comm_s",
    ] + (["pred_low", "pred_high"] if spec.intervals else [])
    click.echo(df[cols].to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    click.echo(f"{len(df)} predictions in {wall:.2f} s ({cpu:.2f} s CPU)")
    if spec.against:
        click.echo(format_validation(validate(df, load_run(spec.against).summary)))
    if spec.output:
        click.echo(f"wrote {spec.output}")
