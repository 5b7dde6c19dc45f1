"""`ddlbench profile WORKLOAD`: one worker's per-layer profile on this device (forward/backward time
per parameter tensor, gradient bytes, FLOPs), a tidy Parquet table for `ddlbench predict`."""

from __future__ import annotations

from pathlib import Path

import click

from harness.cli.runs_cells import RunsCells


def describe(df) -> str:
    first = df.iloc[0]
    lines = [
        f"{first['workload']}: batch {first['batch']}, {len(df)} tensors in {df['layer'].nunique()} layers, "
        f"{df['grad_bytes'].sum() / 2**20:.1f} MiB of gradients, "
        f"{df['flops'].sum() / first['batch'] / 1e9:.2f} GFLOP per sample (forward + backward)"
    ]
    if first["source"] == "measured":
        fwd, bwd, opt = df["forward_s"].sum(), first["backward_total_s"], df["optimizer_s"].sum()
        shared = int(first["concurrent"]) > 1
        how = "means" if shared else "medians"
        beside = f", {first['concurrent'] - 1} more copies computing beside it" if shared else ""
        lines.append(
            f"forward {fwd * 1000:.1f} ms, backward {bwd * 1000:.1f} ms, optimizer {opt * 1000:.1f} ms "
            f"({how} of {first['iters']} iterations, {first['dtype']}, {first['threads']} thread(s) on "
            f"{first['device']}"
            f"{beside})"
        )
        top = df.groupby("layer")[["forward_s", "backward_s"]].sum().sum(axis=1).nlargest(5)
        lines.append(
            "slowest layers (forward + backward): " + ", ".join(f"{name} {t * 1000:.1f} ms" for name, t in top.items())
        )
    return "\n".join(lines)


@click.command("profile", cls=RunsCells, go_on="nothing was written; run it again")
@click.argument("workload")
@click.option("--batch", type=int, help="Per-worker batch (default: the workload's).")
@click.option("--seq-len", type=int, help="Sequence length (default: the workload's).")
@click.option("--iters", default=5, show_default=True, type=int, help="Measured iterations (medians).")
@click.option("--warmup", default=2, show_default=True, type=int, help="Discarded iterations first.")
@click.option(
    "--threads", default=1, show_default=True, type=int, help="torch threads on CPU (1 = one worker's share of a core)."
)
@click.option("--device", default="cpu", show_default=True, help="cpu | cuda.")
@click.option(
    "--concurrent",
    default=1,
    show_default=True,
    type=int,
    help="Workers computing at once on this machine (emulated hosts sharing its cores): the "
    "others run the same training loop while this one is measured.",
)
@click.option(
    "--dtype",
    default="fp32",
    show_default=True,
    help="Compute dtype, applied as a cell of it runs: fp32 (TF32 off) or bf16 (autocast).",
)
@click.option("--counted-only", is_flag=True, help="Only count FLOPs and bytes (no timing; instant).")
@click.option(
    "-o", "--output", type=click.Path(path_type=Path), help="Parquet file (default profile-WORKLOAD.parquet)."
)
def command(workload, batch, seq_len, iters, warmup, threads, device, concurrent, dtype, counted_only, output):
    """Measure WORKLOAD's per-layer forward/backward times, gradient bytes and FLOPs on this device.

    Exit status 0, 2 on bad input, 128+N when signal N stopped it (nothing is written then)."""
    # lazy: what runs the command, not what declares it (docs/ARCHITECTURE.md, "Commands")
    from harness.predict.profiler import run_profile

    df, out = run_profile(
        workload, batch, seq_len, iters, warmup, threads, device, output, counted_only, concurrent, dtype
    )
    click.echo(describe(df))
    click.echo(f"wrote {out}")
