"""What test modules share (docs/ARCHITECTURE.md, "Tests"): paths, loud skips, finding a cell's rank
processes, how a command stopped by SIGTERM ends, the lossless check (a reference trained in one process, and
the check that ranks equal it), and a few small readers. Import it as `from helpers import ...` (tests/ is on
sys.path: conftest.py lives there)."""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pytest
import torch

from harness.contracts.backend import BACKENDS, recipe
from harness.contracts.cell import CellSpec
from harness.contracts.recipes.local import LocalRecipe
from harness.contracts.training import make_optimizer, set_precision
from harness.experiment.cells import resolve
from harness.grouping.cost import MB
from harness.sim.links import Cluster, get_link
from harness.sim.model import ComputeModel
from harness.spawner.cell import launch_cell
from workloads import WORKLOADS

TESTS = Path(__file__).resolve().parent
"""tests/: the probes and toy modules the tests start as processes live here."""
ROOT = TESTS.parent
"""The checkout."""


def require(condition: bool, reason: str) -> None:
    """Skip loudly (a warning and the reason in the summary), or fail under CI (CI=true) where a required
    part must be present. Test modules use it as `from conftest import require`."""
    if condition:
        return
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"required for CI but missing: {reason}")
    warnings.warn(f"NOT RUN: {reason}", stacklevel=1)
    pytest.skip(f"NOT RUN: {reason}")


def rank_pids(under: Path, rank: int | None = None) -> list[int]:
    """Live rank processes of the cells under `under`: those whose output (fd 1) is a `rank<r>.log` there
    (`rank`: that one only). Warm or cold alike: a rank forked by the zygote has the zygote's command line
    and environment in /proc, so neither says which rank it is; its log does."""
    key, name = str(Path(under).resolve()), f"rank{rank}.log" if rank is not None else None
    pids = []
    for proc in Path("/proc").iterdir():
        try:
            if not proc.name.isdigit() or int(proc.name) == os.getpid():
                continue
            out = os.readlink(proc / "fd" / "1")
            if (
                not out.startswith(key + os.sep)
                or not Path(out).name.startswith("rank")
                or (name and Path(out).name != name)
            ):
                continue
            if (proc / "stat").read_text().split(")")[-1].split()[0] != "Z":
                pids.append(int(proc.name))
        except (OSError, ValueError):
            continue
    return pids


def live_children(pid: int, marker: str) -> list:
    """The live descendants of `pid` (psutil processes) whose command line contains `marker`. A child that
    exits or is a zombie while we look is not one, and neither is anything under a `pid` that has gone
    (psutil raises for both; a test polling for ranks must not fail on that race)."""
    import psutil

    try:
        children = psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []
    found = []
    for child in children:
        try:
            if marker in " ".join(child.cmdline()):
                found.append(child)
        except (psutil.NoSuchProcess, psutil.AccessDenied):  # ZombieProcess is a NoSuchProcess
            continue
    return found


def stopped_in_one_line(err: str, returncode: int | None = None) -> str:
    """A command stopped by SIGTERM ended as every command that runs cells does (harness/cli/runs_cells.py):
    exactly one line on stderr about the interruption, no traceback, and (where known) exit status 128+15.
    Returns that line."""
    lines = [line for line in err.splitlines() if "interrupted" in line]
    assert len(lines) == 1 and lines[0].startswith("error: interrupted by SIGTERM"), err
    assert "Traceback" not in err, err
    assert returncode in (None, 128 + 15), (returncode, err)
    return lines[0]


# --- lossless (tests/integration/processes/test_lossless.py has the rule) ----------------------------------------
STEPS = int(
    os.environ.get("LOSSLESS_STEPS", "5")
)  # > every scheme's profiling iterations, so planned schedules (groups, orders) are exercised


SMALL = {
    "bert-base-tiny": dict(batch=2, seq_len=16),
    "resnet50-tiny": dict(batch=4),
    "gpt2-small-tiny": dict(batch=2, seq_len=16),
}


DETERMINISTIC_ENV = {"DDLBENCH_DETERMINISTIC": "1", "CUBLAS_WORKSPACE_CONFIG": ":4096:8"}
"""What the ranks and the reference run with: deterministic algorithms (harness/rank/worker.py, `deterministic`);
cuBLAS reads its workspace setting before its first use."""


def reference(
    workload: str, workers: int, batch: int, seq_len, steps: int, device: str = "cpu"
) -> dict[str, torch.Tensor]:
    """Single-process training on the ranks' concatenated batches, on `device` (returned on the CPU)."""
    for k, v in DETERMINISTIC_ENV.items():
        os.environ.setdefault(k, v)
    torch.use_deterministic_algorithms(True, warn_only=True)
    set_precision("fp32")
    torch.set_num_threads(1)
    spec = WORKLOADS.get(workload)
    torch.manual_seed(0)
    model = spec.build().to(device)
    model.train()
    opt = make_optimizer([p for p in model.parameters() if p.requires_grad])
    shards = [spec.make_batch(batch, seq_len=seq_len, device=device, seed=1000 + r) for r in range(workers)]
    for _ in range(steps):
        if spec.per_sample_norm:
            whole = {k: torch.cat([s[k] for s in shards]) for k in shards[0]}
            spec.loss(model, whole).backward()
        else:
            for s in shards:
                (spec.loss(model, s) / workers).backward()
        opt.step()
        opt.zero_grad()
    torch.use_deterministic_algorithms(False)
    return {n: p.detach().cpu() for n, p in model.named_parameters()}


@functools.cache
def shared_reference(
    workload: str, workers: int, batch: int, seq_len, steps: int, device: str = "cpu"
) -> dict[str, torch.Tensor]:
    """`reference`, computed once per test process for its arguments (the parametrised lossless tests check
    every scheme against the same one), without moving the caller's random state. Read it, never change it."""
    with torch.random.fork_rng():
        return reference(workload, workers, batch, seq_len, steps, device)


def run_and_load(tmp_path, monkeypatch, cell: CellSpec, drop: int | None = None) -> list[dict]:
    """Run the cell for STEPS steps and load every rank's parameters; `drop`: that rank's gradient of the
    last step is dropped (the negative control)."""
    monkeypatch.setenv("DDLBENCH_STEPS", str(STEPS))
    monkeypatch.setenv("DDLBENCH_DUMP_PARAMS", "1")
    for k, v in DETERMINISTIC_ENV.items():
        monkeypatch.setenv(k, v)
    if drop is not None:
        monkeypatch.setenv("DDLBENCH_FAULT", f"dropgrad:{drop}:{STEPS - 1}")
    cell = resolve(cell)
    d = tmp_path / cell.cell_id
    launch_cell(cell, d)
    return [{k: v.cpu() for k, v in torch.load(d / f"params.rank{r}.pt").items()} for r in range(cell.workers)]


def initial(workload: str) -> dict[str, torch.Tensor]:
    torch.manual_seed(0)
    return {n: p.detach().clone() for n, p in WORKLOADS.get(workload).build().named_parameters()}


def check(params: list[dict], ref: dict, workload: str) -> None:
    first = params[0]
    for r, other in enumerate(params[1:], start=1):
        for name, t in first.items():
            assert torch.equal(t, other[name]), f"rank {r} differs from rank 0 in {name}"
    assert set(first) == set(ref)
    if WORKLOADS.get(workload).per_sample_norm:
        for name, t in first.items():
            torch.testing.assert_close(t, ref[name], rtol=1e-4, atol=1e-6, msg=lambda m: f"{name}: {m}")  # noqa: B023 - called at once
        return
    # BatchNorm over 2-sample shards amplifies float rounding (3 ranks sum in another order than one
    # process) step after step; the measure that tells lossless from lossy is then the discrepancy
    # relative to how far training moved each tensor: a dropped or stale gradient is of that order.
    init = initial(workload)
    for name, t in first.items():
        moved = (ref[name] - init[name]).norm()
        off = (t - ref[name]).norm()
        assert moved > 0, f"{name} did not train"
        assert off <= 1e-2 * moved, f"{name}: off by {off:.3g}, training moved it {moved:.3g}"


# --- timing and GPUs --------------------------------------------------------------------------------
def in_flight_peak(trace) -> int:
    edges = sorted(
        [(s, b) for _, b, s, _ in trace] + [(e, -b) for _, b, _, e in trace], key=lambda x: (x[0], x[1])
    )  # at equal times a finish frees before a start takes
    peak = cur = 0
    for _, d in edges:
        cur += d
        peak = max(peak, cur)
    return peak


def need_gpus(n: int) -> None:
    have = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if have < n:
        warnings.warn(f"NOT RUN: this GPU check needs {n} CUDA device(s), this machine has {have}", stacklevel=1)
        pytest.skip(f"NOT RUN: needs {n} CUDA device(s), found {have}")


# --- the plain local Slurm (slurm/local/up.sh; fixture `slurm`: tests/integration/slurm/conftest.py) -----
LOCAL_SLURM_CPUS = 4
"""CPUs of each of its 2 nodes: 4 (virtual) so that test_slurm_sweep's three 2-node jobs run at once; every
module asks for this shape, so that one start serves them all (up.sh restarts a cluster of another shape)."""


# --- the netns Slurm cluster (slurm/local/up-netns.sh; fixture: tests/integration/slurm/conftest.py) -----
NETNS_UP = ROOT / "slurm" / "local" / "up-netns.sh"
NETNS_DOWN = ROOT / "slurm" / "local" / "down-netns.sh"
NETNS_STATE = Path("/var/spool/ddlbench-netns-slurm")
NETNS_CONF = NETNS_STATE / "slurm.conf"
NETNS_LAYOUT = NETNS_STATE / "cluster.json"
NETNS_JOB_TIMEOUT_S = 90


def netns_env() -> dict[str, str]:
    # The job's tasks import harness from the checkout; SLURM_CONF only in the children's environment,
    # so that other test modules in this session keep talking to the plain local Slurm.
    return {**os.environ, "SLURM_CONF": str(NETNS_CONF), "PYTHONPATH": str(ROOT)}


def netns_sbatch(tmp_path: Path, script: str, *args: str, timeout_s: float = NETNS_JOB_TIMEOUT_S) -> tuple[str, str]:
    """Submit, poll `scontrol show job` until it ends (no accounting here), return (state, output)."""
    path = tmp_path / "job.sh"
    path.write_text(script)
    job = subprocess.run(
        ["sbatch", "--parsable", f"--output={tmp_path}/job-%j.out", "--time=2", *args, str(path)],
        capture_output=True,
        text=True,
        timeout=30,
        env=netns_env(),
        check=True,
    ).stdout.strip()
    deadline, state = time.monotonic() + timeout_s, ""
    while time.monotonic() < deadline:
        out = subprocess.run(
            ["scontrol", "show", "job", job], capture_output=True, text=True, timeout=10, env=netns_env(), check=False
        ).stdout
        state = next((w.split("=", 1)[1] for w in out.split() if w.startswith("JobState=")), "")
        if state in ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL"):
            break
        time.sleep(0.2)
    else:
        subprocess.run(["scancel", job], env=netns_env(), timeout=10, check=False)
    out_file = tmp_path / f"job-{job}.out"
    return state, out_file.read_text() if out_file.exists() else ""


# --- frameworks (tests/integration/processes/test_backends.py) ------------------------------------------


def must_have(backend: str) -> None:
    """Skip loudly naming the install command; fail where CI requires the frameworks."""
    reason = BACKENDS.get(backend).available()
    if reason is None:
        return
    msg = f"FRAMEWORK MISSING: {reason}"
    if os.environ.get("CI") == "true" and os.environ.get("DDLBENCH_REQUIRE_FRAMEWORKS") == "1":
        pytest.fail(f"{msg} (CI=true and DDLBENCH_REQUIRE_FRAMEWORKS=1 make this a failure)")
    print(f"\n*** {msg}", file=sys.__stderr__)
    pytest.skip(msg)


def run_backend(tmp_path, monkeypatch, cell: CellSpec, steps: int) -> tuple[list[dict], dict]:
    """One cell through its backend's own launch program; every rank's final parameters and rank 0's result."""
    monkeypatch.setenv("DDLBENCH_STEPS", str(steps))
    monkeypatch.setenv("DDLBENCH_DUMP_PARAMS", "1")
    cell = resolve(cell)
    d = tmp_path / cell.cell_id
    result = json.loads(Path(recipe(cell.backend, LocalRecipe).launch(cell, d, None)).read_text())
    return [torch.load(d / f"params.rank{r}.pt") for r in range(cell.workers)], result


# --- predictor toys (tests/unit/predict/test_predict.py, tests/integration/processes/test_scheme_contract.py) ---


def toy(sizes_mb, backward_ms, forward_ms=None, optimizer_ms=1.0, batch=32, workload="toy") -> ComputeModel:
    """Tensors in parameter order (input side first); each layer owns one tensor; backward visits
    them in reverse (output side ready first), tensor i taking backward_ms[i]."""
    n = len(sizes_mb)
    numels = tuple(int(s * MB / 4) for s in sizes_mb)
    order = tuple(reversed(range(n)))
    ready, t = [0.0] * n, 0.0
    for i in order:
        t += backward_ms[i] / 1000
        ready[i] = t
    fwd = forward_ms or [b / 2 for b in backward_ms]
    return ComputeModel(
        workload,
        "seq",
        batch,
        64,
        tuple(x * 4 for x in numels),
        numels,
        order,
        tuple(ready),
        t,
        tuple((i,) for i in range(n)),
        tuple(f / 1000 for f in fwd),
        tuple(optimizer_ms / 1000 * s / sum(sizes_mb) for s in sizes_mb),
        1e9,
        "toy",
    )


BERTISH = toy(
    [90.0] + [2.25, 2.25, 0.01, 0.01, 9.0, 0.01, 9.0, 0.01] * 12 + [2.25],
    [5.0] + [1.0, 1.0, 0.1, 0.1, 3.0, 0.1, 3.0, 0.1] * 12 + [1.0],
)


def cluster(nodes=2, g=4, inter="ib-100g", intra="pcie3-x16", **kw) -> Cluster:
    return Cluster(nodes, g, get_link(inter), get_link(intra), **kw)
