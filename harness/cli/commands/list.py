"""`ddlbench list`: workloads, schemes, backends and network profiles, one line each, with their knobs. The
registries' declarations come from harness/cli/catalog.py, so listing them imports no torch."""

from __future__ import annotations

import importlib.util

import click

from harness.cli import catalog
from harness.networks.profiles import profiles


def _installed(library: str | None) -> str:
    """Whether a backend's library is installed here, found without importing it (whether it also runs here,
    built against this torch, is `ddlbench doctor`'s question)."""
    if library is None:
        return "installed with torch"
    found = importlib.util.find_spec(library) is not None
    return f"{library} installed; `ddlbench doctor` checks it runs" if found else f"{library} not installed"


def listing() -> str:
    declared = catalog.declared()
    lines = ["workloads:"]
    for wl in declared["workloads"]:
        seq = f", seq {wl['seq_len']}" if wl["seq_len"] else ""
        lines.append(f"  {wl['name']:<18} {wl['description']} [batch {wl['batch']}{seq}, unit {wl['sample_unit']}]")
    lines.append("schemes:")
    for s in declared["schemes"]:
        lines.append(f"  {s['name']:<18} {s['description']} (backends: {', '.join(s['backends'])})")
        for knob in s["knobs"]:
            lines.append(f"  {'':<18}   knob {knob['name']} = {knob['default']}: {knob['doc']}")
    lines.append("backends:")
    for b in declared["backends"]:
        lines.append(f"  {b['name']:<18} {b['description']} ({_installed(b['library'])})")
    lines.append("networks (--network NAME; a site's own in $DDLBENCH_NETWORKS or ~/.config/ddlbench/networks.yaml):")
    for name, prof in profiles().items():
        env = " ".join(f"{k}={v}" for k, v in prof.env().items() if not k.startswith(("TP_", "HOROVOD_")))
        lines.append(f"  {name:<18} {prof.description or '(site profile)'}" + (f" [{env}]" if env else ""))
    return "\n".join(lines)


@click.command("list")
def command() -> None:
    """List workloads, schemes (with their knobs), backends and network profiles."""
    click.echo(listing())
