"""`ddlbench list`: workloads, schemes, backends and network profiles, one line each, with their knobs."""

from __future__ import annotations

import click

from harness import backends
from harness.networks.profiles import profiles
from harness.schemes import SCHEMES
from workloads import WORKLOADS


def listing() -> str:
    registered = backends.load()
    lines = ["workloads:"]
    for name, wl in WORKLOADS.items():
        seq = f", seq {wl.seq_len}" if wl.seq_len else ""
        lines.append(f"  {name:<18} {wl.description} [batch {wl.batch}{seq}, unit {wl.sample_unit}]")
    lines.append("schemes:")
    for name, s in SCHEMES.items():
        lines.append(f"  {name:<18} {s.description} (backends: {', '.join(s.backends)})")
        for k, knob in s.knobs.items():
            lines.append(f"  {'':<18}   knob {k} = {knob.default!r}: {knob.doc}")
    lines.append("backends:")
    for name, b in registered.items():
        why = b.available()
        state = "available" if why is None else f"not available here: {why}"
        lines.append(f"  {name:<18} {b.description} ({state})")
    lines.append("networks (--network NAME; a site's own in $DDLBENCH_NETWORKS or ~/.config/ddlbench/networks.yaml):")
    for name, prof in profiles().items():
        env = " ".join(f"{k}={v}" for k, v in prof.env().items() if not k.startswith(("TP_", "HOROVOD_")))
        lines.append(f"  {name:<18} {prof.description or '(site profile)'}" + (f" [{env}]" if env else ""))
    return "\n".join(lines)


@click.command("list")
def command() -> None:
    """List workloads, schemes (with their knobs), backends and network profiles."""
    click.echo(listing())
