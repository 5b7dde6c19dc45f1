"""`ddlbench testbed up|status|measure|down`: an emulated multi-host network (harness/testbed/)."""

from __future__ import annotations

import json
from dataclasses import asdict

import click

from harness.cli.runs_cells import RunsCells
from harness.core.errors import UserError
from harness.testbed import netns
from harness.testbed.state import TestbedState


def _table(s: TestbedState) -> str:
    rows = [("host", "namespace", "address", "interface", "rate (each direction)")]
    rows += [(str(h.index), h.netns, h.addr, h.ifname, f"{s.rate_mbit:g} Mbit/s") for h in s.hosts]
    widths = [max(len(r[c]) for r in rows) for c in range(len(rows[0]))]
    lines = ["  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip() for r in rows]
    forced = "  (forced above the meaningful limit)" if s.forced else ""
    cpu = []
    if s.cgroup_version:
        share = f"{s.host_cpus:g} CPU" if s.host_cpus is not None else "no CPU quota"
        cores = f", {s.host_cores} core(s) of its own" if s.host_cores else ""
        cpu = [f"every host: {share}{cores} (cgroup {s.cgroup_version}: {', '.join(s.hosts[0].cgroups)} for host 0)"]
    join = " (joining its control groups first: procs/cgjoin.py)" if s.cgroup_version else ""
    return "\n".join(
        [
            f"testbed {s.prefix}: {len(s.hosts)} hosts on bridge {s.bridge} (netns {s.switch_netns}), "
            f"tbf {s.rate_mbit:g} Mbit/s both directions, up since {s.created_at}{forced}",
            *lines,
            *cpu,
            f"run on host i: nsenter --net={s.hosts[0].netns_path.replace('-h0', '-h<i>')} -- <command>{join}",
        ]
    )


@click.group(name="testbed")
def command() -> None:
    """Emulated multi-host network: one network namespace per host, veth links to a bridge, every
    link shaped with tbf in both directions. Needs root."""


@command.command("up")
@click.option("--hosts", type=int, default=2, show_default=True, help="Number of emulated hosts (2..16).")
@click.option(
    "--rate",
    default="1gbit",
    show_default=True,
    help="Link rate in each direction: 500mbit, 1gbit, ... (a bare number is Mbit/s).",
)
@click.option("--force", is_flag=True, help="Allow rates above 2 Gbit/s, where the CPU, not the link, limits.")
@click.option(
    "--host-cpus",
    default=None,
    help="CPU share of every host, in cores (e.g. 0.5): its own control group, CFS quota/period. Default: none.",
)
@click.option(
    "--host-cores",
    default=None,
    help="Cores of its own per host (cpuset; host i on cores i*N..i*N+N-1). Default: every core.",
)
def up_cmd(hosts: int, rate: str, force: bool, host_cpus: str | None, host_cores: str | None) -> None:
    """Build the testbed (no change if the same one is already up; a different one is replaced)."""
    _refuse_while_in_use("reshape")
    click.echo(_table(netns.up(hosts, rate, force=force, host_cpus=host_cpus, host_cores=host_cores)))


def _refuse_while_in_use(doing: str) -> None:
    holder = netns.lease_holder()
    if holder:
        raise UserError(
            f"will not {doing} the testbed: {holder} is using it (one testbed per machine); wait "
            f"for it to finish or stop it first"
        )


@command.command("status")
@click.option("--json", "as_json", is_flag=True, help="Print the state as JSON (what launchers read).")
def status_cmd(as_json: bool) -> None:
    """Show the testbed that is up, if any."""
    s = netns.status()
    if as_json:
        click.echo(json.dumps(asdict(s) if s else None, indent=2))
    elif s is None:
        click.echo("no testbed is up (start one: ddlbench testbed up --hosts 2 --rate 1gbit)")
    else:
        click.echo(_table(s))


@command.command("measure", cls=RunsCells, go_on="nothing was recorded; measure again")
@click.option("--size-mb", type=float, default=32.0, show_default=True, help="All-reduce size, MiB.")
@click.option("--reps", type=int, default=5, show_default=True, help="Timed repetitions after warm-up.")
@click.option("--hosts", type=int, default=2, show_default=True, help="Ranks, one per host 0..N-1.")
def measure_cmd(size_mb: float, reps: int, hosts: int) -> None:
    """Time a real gloo all-reduce between emulated hosts; compare busbw with the configured rate.

    Exit status 0, 1 when the measurement failed (its reason and the ranks' last lines), 2 on bad input,
    128+N when signal N stopped it."""
    # lazy: what runs the command, not what declares it (docs/ARCHITECTURE.md, "Commands")
    from harness.commbench.testbed import measure_testbed

    r = measure_testbed(int(size_mb * 2**20), reps, hosts)
    click.echo(
        f"all-reduce {r['size_bytes'] / 2**20:g} MiB x {hosts} ranks: median {r['time_s_median'] * 1e3:.1f} ms, "
        f"algbw {r['algbw_gbit_s']:.3f} Gbit/s, busbw {r['busbw_gbit_s']:.3f} Gbit/s "
        f"= {r['busbw_over_rate']:.3f} x configured {r['rate_mbit']:g} Mbit/s (median of {reps})"
    )


@command.command("down")
def down_cmd() -> None:
    """Remove the testbed: processes inside it, namespaces, links, bridge, state file."""
    _refuse_while_in_use("remove")
    removed = netns.down()
    click.echo("removed: " + ", ".join(removed) if removed else "nothing was up")
