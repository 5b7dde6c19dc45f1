"""Runs and sweeps on the emulated multi-host testbed (harness/testbed/netns.py).

    # sweeps/testbed-2host.yaml: one network
    testbed: {hosts: 2, rate: 500mbit}          # optional: placement: round-robin | blocked,
                                                #   host_cpus: 0.5 (a CPU share per host), host_cores: 1
    # sweeps/testbed-profiles.yaml: every cell on every named network, one run directory
    testbed: {hosts: 2}
    networks: {slow: {rate: 300mbit}, fast: {rate: 1gbit}}

    ddlbench sweep sweeps/testbed-2host.yaml     # brings the testbed up (or keeps it), runs, leaves it up
    ddlbench testbed up --hosts 2 --rate 500mbit && ddlbench run --workload bert-base-tiny --testbed

Chosen like every launcher (harness/launchers/choose.py): by a sweep file's `testbed:`/`networks:`, or by name
(`ddlbench run --testbed`, `ddlbench sweep FILE --launcher testbed`), when it runs on the testbed that is up,
as it is.

A cell of W workers uses min(W, hosts) hosts (its `nodes`); placement.py puts the ranks there. Rows say
network = `emulated-<rate>` (or the profile's name) and network_rate_mbit. Profiles differ in the cell
id, so a run directory holds every profile's cells and `--resume` skips finished cells of any profile;
the testbed is reshaped (netns.up with the profile's rate) only when a cell of another rate must run.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path

import torch

from harness.contracts.backend import recipe
from harness.contracts.cell import CellSpec
from harness.contracts.launcher import Launcher, LauncherEntry, LaunchRequest, Network, register
from harness.contracts.placement import Placement
from harness.contracts.recipes.testbed import PlacedRecipe
from harness.core.atomic import write_json_atomic
from harness.core.errors import CellFailed, UserError
from harness.networks.profiles import rate_label
from harness.procs.argv import WORKER_MODULE
from harness.spawner.cell import launch_cell
from harness.testbed import cgroups, links, netns
from harness.testbed import placement as pl
from harness.testbed.state import MAX_HOSTS, MIN_HOSTS, TestbedState

DEFAULT_HOSTS = 2


@dataclass(frozen=True)
class TestbedSpec:
    """The `testbed:` block of a sweep file."""

    __test__ = False  # not a pytest test class despite its name

    hosts: int = DEFAULT_HOSTS
    """Emulated hosts to bring up (2..16); a cell of W workers uses min(W, hosts) of them."""
    rate: str | float | None = None
    """Link rate of every host in each direction (500mbit, 1gbit; a number is Mbit/s); omit it when
    `networks:` sets the rates."""
    placement: str = "round-robin"
    """Workers onto hosts: round-robin (rank r on host r mod nodes) or blocked (consecutive ranks
    together)."""
    worker_hosts: int | None = None
    """Hosts that carry workers (default: all of them); fewer leaves the others to the parameter servers
    (`server_hosts: auto` then puts them there)."""
    host_cpus: float | str | None = None
    """CPU share of every host in cores (e.g. 0.5: its own control group, harness/testbed/cgroups.py);
    omitted: no share."""
    host_cores: int | None = None
    """Cores of its own per host (cpuset); omitted: every core."""


@dataclass(frozen=True)
class EmulatedNetwork:
    """One shaped network the sweep runs every cell on: a rate under a label (not a harness/networks/profiles.py
    profile: the testbed places each rank on its host's interface itself)."""

    label: str
    """Recorded as the rows' `network`: the profile's name, or emulated-<rate> for a bare
    `testbed: {rate:}`."""
    rate_mbit: float
    """tbf rate of every link in each direction, Mbit/s."""


def _mapping(value, where: str, fields: type) -> dict:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise UserError(f"`{where}` in the sweep file must be a mapping like {{hosts: 2, rate: 500mbit}}")
    known = [f.name for f in dataclasses.fields(fields)]
    unknown = sorted(set(value) - set(known))
    if unknown:
        raise UserError(
            f"unknown key(s) {', '.join(map(str, unknown))} under `{where}`: known keys are {', '.join(known)}"
        )
    return value


def parse_testbed(  # noqa: C901 - one check per field of the sweep file's blocks
    testbed: dict | None, networks: dict | None, network: str = "loopback"
) -> tuple[TestbedSpec, list[EmulatedNetwork]]:
    """Check the sweep file's `testbed:` and `networks:` blocks; return the spec and the profiles, in
    file order. Pure (no system access)."""
    spec = TestbedSpec(**_mapping(testbed, "testbed", TestbedSpec))
    hosts = spec.hosts
    if not isinstance(hosts, int) or isinstance(hosts, bool) or not MIN_HOSTS <= hosts <= MAX_HOSTS:
        raise UserError(
            f"testbed hosts must be an integer in {MIN_HOSTS}..{MAX_HOSTS}, got {spec.hosts!r}; "
            f"fix `testbed: {{hosts: ...}}`"
        )
    pl.check_policy(spec.placement)
    wh = spec.worker_hosts
    if wh is not None and (not isinstance(wh, int) or isinstance(wh, bool) or not 1 <= wh <= hosts):
        raise UserError(
            f"testbed worker_hosts must be an integer in 1..{hosts} (the testbed's hosts), got "
            f"{wh!r}; fix `testbed: {{worker_hosts: ...}}`"
        )
    share = cgroups.parse_share(spec.host_cpus, hosts)
    spec = dataclasses.replace(spec, host_cpus=share, host_cores=cgroups.parse_cores(spec.host_cores, hosts, share))
    _check_label(network)
    if networks is not None:
        if spec.rate is not None:
            raise UserError(
                "both `testbed: {rate:}` and `networks:` are given: the profiles set the rates; "
                "drop `rate` from `testbed:`"
            )
        if not isinstance(networks, dict) or not networks:
            raise UserError(
                "`networks:` must map profile names to {rate: ...}, e.g. {slow: {rate: 300mbit}, fast: {rate: 1gbit}}"
            )
        profiles = []
        for name, body in networks.items():
            body = _mapping(body, f"networks: {name}", _ProfileKeys)
            if "rate" not in body:
                raise UserError(f"network profile {name!r} has no rate: write {{{name}: {{rate: 1gbit}}}}")
            profiles.append(EmulatedNetwork(label=str(name), rate_mbit=netns.parse_rate(body["rate"])))
    elif spec.rate is None:
        raise UserError("`testbed:` needs a rate (e.g. {hosts: 2, rate: 500mbit}), or add `networks:` with named rates")
    else:
        rate = netns.parse_rate(spec.rate)
        profiles = [EmulatedNetwork(label=rate_label(rate), rate_mbit=rate)]
    for p in profiles:
        netns.check_request(spec.hosts, p.rate_mbit)
    rates = [p.rate_mbit for p in profiles]
    if len(set(rates)) != len(rates):
        raise UserError(
            f"two network profiles have the same rate ({', '.join(f'{r:g}' for r in rates)} "
            f"Mbit/s): they would measure the same network twice; give each its own rate"
        )
    return spec, profiles


def _check_label(network: str) -> None:
    """A sweep on the testbed is labelled by its rates: its file's own `network:` is refused."""
    if network != "loopback":
        raise UserError(
            f"`network: {network}` labels loopback sweeps; on the testbed the label is "
            f"emulated-<rate>, or name profiles under `networks:` "
            f"(e.g. {{{network}: {{rate: 1gbit}}}})"
        )


@dataclass(frozen=True)
class _ProfileKeys:
    rate: str | float | None = None
    """Link rate of every host in each direction."""


@dataclass(frozen=True)
class TestbedLauncher:
    """A run_cells launcher: run each cell's ranks inside the testbed's host namespaces.

    With `reconfigure`, the testbed is brought to (hosts, the cell's rate) first (netns.up is a no-op when
    it already is); without, the testbed that is up is used as it is and a mismatch is an error."""

    __test__ = False

    hosts: int
    """Testbed size the cells were planned for."""
    policy: str = "round-robin"
    """Worker placement (placement.POLICIES)."""
    reconfigure: bool = True
    """Bring the testbed up / reshape it for each cell's rate (sweeps); False for `ddlbench run --testbed`."""
    host_cpus: float | None = None
    """Every host's CPU share when it brings the testbed up (TestbedSpec.host_cpus)."""
    host_cores: int | None = None
    """Cores of its own per host when it brings the testbed up."""

    def testbed_for(self, cell: CellSpec) -> TestbedState:
        if self.reconfigure:
            return netns.up(self.hosts, cell.network_rate_mbit, host_cpus=self.host_cpus, host_cores=self.host_cores)
        s = netns.status()
        if s is None or len(s.hosts) != self.hosts or s.rate_mbit != cell.network_rate_mbit:
            raise UserError(
                f"the testbed changed or went down during the run; bring it back with `ddlbench "
                f"testbed up --hosts {self.hosts} --rate {cell.network_rate_mbit:g}mbit`"
            )
        return s

    def __call__(self, cell: CellSpec, cell_dir: Path, placement: Placement | None = None) -> Path:
        """Run the cell on its hosts. Their links are read at its start and end (harness/testbed/links.py): a
        link down at the start fails the cell at once, naming it; one that went down or was reshaped during
        the cell is named in its failure, or flagged on its row as a warning when it completed (README,
        "Faults tried"). While it runs they are read every second (`links.Watch`): a link that stays down ends
        the cell then, not at its timeout."""
        state = self.testbed_for(cell)
        where = pl.describe(cell, state, self.policy)
        used = list(dict.fromkeys(where["rank_hosts"]))
        held = links.snapshot(state, used)
        cut = links.down(held)
        if cut:
            raise CellFailed(
                f"{'; '.join(cut)} at the cell's start: bring it up (`ip -n NETNS link set DEV up`) or rebuild "
                f"the testbed (`ddlbench testbed down`), then `--resume --retry-failed`"
            )
        before = pl.throttling(state)
        watch = links.Watch(lambda: links.ports(state, used))
        try:
            result = self._launch(cell, cell_dir, state, WORKER_MODULE, watch)
        except CellFailed as e:
            moved = links.changed(held, links.snapshot(state, used)) + watch.flaps
            if moved:
                raise CellFailed(f"{e.reason}; {'; '.join(moved)}", e.log_tail) from None
            raise
        moved = links.changed(held, links.snapshot(state, used)) + watch.flaps
        _record_placement(
            result,
            cell,
            {**where, **pl.throttled_over(before, pl.throttling(state), where)},
            [f"{m}: its time is not the method's on this network" for m in moved],
        )
        return result

    def run_module(
        self, cell: CellSpec, cell_dir: Path, placement: Placement | None = None, module: str = WORKER_MODULE
    ) -> Path:
        """A program that is not a benchmark cell (commbench's timer, harness.rank.commbench) on the testbed
        that is up, its ranks placed by a cell's rules (`placement` is ignored: the testbed places); its result
        is rank 0's as written."""
        return self._launch(cell, cell_dir, pl.testbed_up(), module)

    def _launch(self, cell: CellSpec, cell_dir: Path, state: TestbedState, module: str, abort=lambda: None) -> Path:
        placement = pl.testbed_placement(cell, state, self.policy)
        with recipe(cell.backend, PlacedRecipe).session(cell, placement) as placement:
            return launch_cell(cell, cell_dir, placement, module=module, abort=abort)


def _record_placement(result_path: Path, cell: CellSpec, where: dict, warnings: list[str] = ()) -> None:
    """Add the placement to rank 0's result, and `warnings` to its warnings (the row's reason then says them).
    `dist.nodes` becomes the cell's: the worker derives it as WORLD_SIZE // LOCAL_WORLD_SIZE, which is wrong
    once hosts carry unequal numbers of ranks (3 workers on 2 hosts, or a parameter server beside the
    workers)."""
    result = json.loads(Path(result_path).read_text())
    result.setdefault("dist", {}).update(nodes=cell.nodes, launcher="testbed", **where)
    if warnings:
        result.setdefault("warnings", []).extend({"warning": w, "log": ""} for w in warnings)
    write_json_atomic(Path(result_path), result)


def check_cell(cell: CellSpec, spec: TestbedSpec) -> None:
    """A cell this testbed can place, or UserError now (before anything runs)."""
    pl.check_device(cell, torch.cuda.device_count())
    pl.rank_hosts(cell.workers, cell.servers, cell.nodes, spec.hosts, spec.placement, cell.server_hosts)


def place_cell(cell: CellSpec, spec: TestbedSpec) -> CellSpec:
    """The cell on this testbed's hosts (its `nodes`: the hosts that carry its workers), checked."""
    cell = cell.with_(nodes=pl.cell_nodes(cell, spec.hosts, spec.worker_hosts))
    check_cell(cell, spec)
    return cell


@contextlib.contextmanager
def _leased(title: str):
    """The run holds the testbed (no other run reshapes it meanwhile). Not root, no iproute2: one line
    before the first cell, not one failed cell after another."""
    netns.check_system()
    with netns.lease(title):
        yield


def make(request: LaunchRequest) -> Launcher:
    """The sweep's `testbed:` and `networks:`: every cell on every network profile, in its hosts'
    namespaces (the testbed is brought up, or reshaped, per profile and left up). Without them (chosen by
    name: `ddlbench run --testbed`), the testbed that is up, as it is: one network, emulated-<its rate>."""
    cfg = request.sweep
    if cfg is None or not (cfg.testbed or cfg.networks):
        return _as_it_is(request)
    spec, profiles = parse_testbed(cfg.testbed, cfg.networks, cfg.network)
    env_extra = {
        "testbed_hosts": spec.hosts,
        "testbed_placement": spec.placement,
        **({"testbed_worker_hosts": spec.worker_hosts} if spec.worker_hosts else {}),
        "testbed_networks": ",".join(f"{p.label}={p.rate_mbit:g}mbit" for p in profiles),
        **pl.cpu_columns(spec.host_cpus, spec.host_cores),
    }
    launch = TestbedLauncher(spec.hosts, spec.placement, host_cpus=spec.host_cpus, host_cores=spec.host_cores)
    return Launcher(
        "testbed",
        launch,
        lambda w: pl.nodes_for(w, spec.hosts),
        lambda cell: place_cell(cell, spec),
        env_extra,
        hosts=spec.hosts,
        networks=tuple(Network(p.label, p.rate_mbit) for p in profiles),
        session=lambda: _leased(request.title or "ddlbench sweep"),
        run_module=launch.run_module,
    )


def _as_it_is(request: LaunchRequest) -> Launcher:
    """The launcher on the testbed that is up (a one-line error when none is): its hosts, round-robin, its
    rate under its emulated-<rate> label; the run holds the testbed's lease, and a testbed that changes
    meanwhile fails the cell."""
    if request.sweep is not None:
        _check_label(request.sweep.network)
    s = pl.testbed_up()
    spec = TestbedSpec(hosts=len(s.hosts))
    launch = TestbedLauncher(spec.hosts, spec.placement, reconfigure=False)
    return Launcher(
        "testbed",
        launch,
        lambda w: pl.nodes_for(w, spec.hosts),
        lambda cell: place_cell(cell, spec),
        pl.cpu_columns(s.host_cpus, s.host_cores),
        hosts=spec.hosts,
        networks=(Network(rate_label(s.rate_mbit), s.rate_mbit),),
        session=lambda: _leased(f"{request.title or 'ddlbench run'} --testbed"),
        run_module=launch.run_module,
    )


register(
    LauncherEntry(
        "testbed",
        "every rank in its host's network namespace of the emulated testbed; "
        "chosen by a sweep file's `testbed:`/`networks:`, or by name (`--launcher testbed`, "
        "`run --testbed`: the testbed that is up)",
        make=make,
        detect=lambda request: bool(request.sweep is not None and (request.sweep.testbed or request.sweep.networks)),
    )
)
