"""What `ddlbench advise` may recommend: every method that runs here, over the knob grid declared beside
its knobs (`Grid` in harness/schemes/knobs.py) and, for parameter servers, over the server counts and
placements the layout offers. Pure: no process, no file.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from harness.schemes import SCHEMES
from harness.sim.model import Model

REFERENCE = "ddp"
"""The reference every recommendation is measured against: DDP with its default knobs."""


@dataclass(frozen=True)
class Layout:
    """Where the workers run, as the predictor and the cells see it."""

    workers: int
    """Worker processes in all."""
    nodes: int = 1
    """Hosts carrying workers."""
    max_servers: int = 1
    """Parameter-server processes of a PS cell here (`--servers`, one per worker node unless given): a PS
    candidate tries 1..max_servers."""
    spare_hosts: int = 0
    """Hosts without workers (the testbed's or the allocation's): dedicated server hosts need one."""

    @property
    def workers_per_node(self) -> int:
        return -(-self.workers // self.nodes)

    def server_hosts(self) -> tuple[str, ...]:
        """The server placements worth trying here (docs/ARCHITECTURE.md, "Server placement")."""
        return ("colocated", "dedicated") if self.spare_hosts else ("colocated",)


@dataclass(frozen=True)
class Candidate:
    """One configuration `advise` can predict and measure."""

    scheme: str
    """Registered scheme."""
    backend: str
    """Backend it runs on (the first of the scheme's backends that is usable here)."""
    knobs: dict = field(default_factory=dict)
    """The scheme's knobs, resolved (every knob, defaults filled)."""
    servers: int = 0
    """Parameter servers (PS schemes), else 0."""
    server_hosts: str = "auto"
    """colocated | dedicated (PS schemes), else auto."""

    @property
    def label(self) -> str:
        """Readable and unique: `ddp bucket_cap_mb=5`, `bsp-ps partition_mb=4 s2 dedicated`; knobs at
        their defaults are left out."""
        defaults = SCHEMES.get(self.scheme).knob_class.grid()[0]
        # in the knobs' declared order, whatever order the dict came in (a JSON round trip sorts it)
        order = [k for k in defaults if k in self.knobs] + sorted(k for k in self.knobs if k not in defaults)
        changed = [f"{k}={_text(self.knobs[k])}" for k in order if self.knobs[k] != defaults.get(k)]
        ps = [f"s{self.servers}", self.server_hosts] if self.servers else []
        backend = [] if self.backend == SCHEMES.get(self.scheme).backends[0] else [f"on {self.backend}"]
        return " ".join([self.scheme, *changed, *ps, *backend])

    @property
    def knobs_json(self) -> str:
        return json.dumps(self.knobs, sort_keys=True)

    @property
    def is_reference(self) -> bool:
        return self.scheme == REFERENCE and self.knobs == SCHEMES.get(REFERENCE).knob_class.grid()[0]


def _text(v) -> str:
    return f"{v:g}" if isinstance(v, float) else str(v)


def reference(backend: str = "torch") -> Candidate:
    return Candidate(REFERENCE, backend, SCHEMES.get(REFERENCE).knob_class.grid()[0])


def candidates(
    methods: list[str], layout: Layout, usable: dict[str, bool], full_grid: bool = True
) -> tuple[list[Candidate], dict[str, str]]:
    """(every candidate of `methods` on `layout`, {method: why it is left out}). `usable`: backend name
    -> whether it runs here. Methods without a simulation model are left out (they cannot be ranked);
    `full_grid=False` keeps each method's default knobs only."""
    out: list[Candidate] = []
    skipped: dict[str, str] = {}
    for name in methods:
        entry = SCHEMES.get(name)
        if not isinstance(entry.model, Model):
            skipped[name] = f"no simulation model ({getattr(entry.model, 'reason', 'none registered')})"
            continue
        backend = next((b for b in entry.backends if usable.get(b)), None)
        if backend is None:
            skipped[name] = f"none of its backends ({', '.join(entry.backends)}) is usable here"
            continue
        grid = entry.knob_class.grid() if full_grid else entry.knob_class.grid()[:1]
        places = (
            [(s, h) for s in range(1, layout.max_servers + 1) for h in layout.server_hosts()]
            if entry.parameter_server
            else [(0, "auto")]
        )
        out += [Candidate(name, backend, knobs, s, h) for knobs in grid for s, h in places]
    return out, skipped


def shortlist(
    ranked: list[Candidate], k: int, predicted_s: list[float] | None = None, same_within: float = 0.0
) -> list[Candidate]:
    """What gets measured: the best k of `ranked` (best predicted first, with their predicted iteration
    times), plus the reference (DDP default) when it is not among them. A knob variant predicted within
    `same_within` (relative) of a variant of the same method already chosen, the reference included,
    is passed over: the model says the knob does not matter there, and what it gets wrong about one
    variant (the method's schedule, how its traffic shares the machine) it gets wrong about the other,
    so a second measurement tells only the run-to-run spread while a candidate of another method is left
    unmeasured. Pure."""
    times = {c.label: t for c, t in zip(ranked, predicted_s)} if predicted_s is not None else {}
    ref = next((c for c in ranked if c.is_reference), None)
    top: list[Candidate] = []

    def alike(c: Candidate, d: Candidate) -> bool:
        return (
            (c.scheme, c.backend) == (d.scheme, d.backend)
            and c.label in times
            and d.label in times
            and abs(times[c.label] / times[d.label] - 1) <= same_within
        )

    for c in ranked:
        if len(top) == k:
            break
        if c is ref or not any(alike(c, d) for d in [*top, *([ref] if ref is not None else [])]):
            top.append(c)
    if ref is not None and ref not in top:
        top.append(ref)
    return top


def sweep_mapping(c: Candidate, base: dict, iters: int, name: str) -> dict:
    """The sweep file (as a mapping) that measures candidate `c` alone, and reproduces it: `base` holds
    the settings every candidate shares (workloads, workers, warmup, batch, testbed, ...)."""
    out = {
        "name": name,
        **base,
        "schemes": [c.scheme],
        "backends": [c.backend],
        "iters": iters,
        "baseline": False,
        "knobs": {c.scheme: dict(c.knobs)} if c.knobs else {},
    }
    if c.servers:
        out.update(servers=[c.servers], server_hosts=[c.server_hosts])
    return out
