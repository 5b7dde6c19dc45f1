"""Worker (and parameter-server) entry point: one process per rank.

    python -m harness.rank.worker --cell CELL.json --out CELL_DIR     # under our launcher, torchrun or srun

Rank and rendezvous come from the environment (harness.launchers.identity). Workers build the same model
(same seed), make their own synthetic batch once on the device, run the shared timing loop, and rank 0
writes `result.json` (every rank's raw samples) atomically into CELL_DIR.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import math
import os
import random
import socket
import sys
import time
from pathlib import Path

import torch

from harness import backends
from harness.contracts.cell import CellSpec, stop_bounds
from harness.contracts.devices import check_group_backend, device_name, rank_device
from harness.contracts.training import (
    DTYPES,
    autocast_loss,
    bounded,
    crash_stacks,
    exit_now,
    make_optimizer,
    set_precision,
)
from harness.core.atomic import write_json_atomic
from harness.core.errors import UserError
from harness.launchers.identity import RankIdentity, from_environ
from harness.measure import host_heap
from harness.measure.loop import run_loop, run_until_precise
from harness.measure.stoprule import AUDIT_VAR, BlockDecision, StopRule
from harness.measure.trace import Tracer
from harness.networks.netif import counter_delta, read_counters
from harness.procs.env import PLACED_AT_VAR, RANK_START_VAR
from harness.results.gpu_env import gpu_models
from harness.schemes import SCHEMES, SchemeContext
from workloads import WORKLOADS
from workloads.base import count_params, flops_per_sample, grad_bytes

JITTER_MIN_S = 0.001
"""The shortest sleep of the `jitter` fault (_fault)."""


def _fault(cell: CellSpec, rank: int):
    """Fault injection for tests: DDLBENCH_FAULT=crash|hang|segv:RANK:ITER (only for the matching rank;
    segv reads address 0 in native code, a real segmentation fault), or
    slow:RANK:SECONDS[:SCHEME], a sleep in every iteration of that rank (of that scheme's cells only when
    named): an injected regression, to show what the gate catches (README, "Reports and the CI regression
    gate"); jitter:RANK:SECONDS[:SCHEME], a random sleep of 1 ms to SECONDS (log-uniform, seeded by the rank) in
    every iteration: an injected noisy rank, which the stop rule measures longer (README, "Measuring")."""
    spec = os.environ.get("DDLBENCH_FAULT", "")
    if not spec or spec.startswith(("shutdown:", "dropgrad:")):  # _shutdown_fault, _dropped_gradient
        return None
    kind, r, it, *only = spec.split(":")
    if int(r) != rank or (only and only[0] != cell.scheme):
        return None
    if kind == "slow":
        return lambda _i: time.sleep(float(it))
    if kind == "jitter":
        draw, low, high = random.Random(rank).uniform, math.log(JITTER_MIN_S), math.log(float(it))
        return lambda _i: time.sleep(math.exp(draw(low, high)))

    def fault(i: int) -> None:
        if i == int(it):
            print(f"injected fault: {kind} at iteration {i}", flush=True)
            if kind == "crash":
                os._exit(17)
            if kind == "segv":
                ctypes.string_at(0)  # a real invalid read in C: SIGSEGV, as a crash inside a library
            time.sleep(10**6)

    return fault


def _dropped_gradient(rank: int, loss_fn):
    """The lossless check's negative control: DDLBENCH_FAULT=dropgrad:RANK:ITER makes that rank's loss zero
    in that iteration, so its gradient for that step is dropped (all zeros) while every scheme runs as
    usual; a check that passes such a run cannot tell a lost gradient from rounding
    (tests/integration/processes/test_lossless.py)."""
    spec = os.environ.get("DDLBENCH_FAULT", "")
    if not spec.startswith("dropgrad:"):
        return loss_fn
    _, r, it = spec.split(":")
    if int(r) != rank:
        return loss_fn
    calls = [0]

    def loss(model, batch):
        out = loss_fn(model, batch)
        calls[0] += 1
        return out * 0.0 if calls[0] - 1 == int(it) else out

    return loss


def deterministic() -> None:
    """DDLBENCH_DETERMINISTIC=1 (the lossless tests): deterministic algorithms where the device has them, so
    a reference computed on the same device runs the same kernels (cuBLAS needs CUBLAS_WORKSPACE_CONFIG
    set before its first use: the tests set it in the ranks' environment)."""
    if os.environ.get("DDLBENCH_DETERMINISTIC") == "1":
        torch.use_deterministic_algorithms(True, warn_only=True)
        torch.backends.cudnn.deterministic = True
        torch.backends.cudnn.benchmark = False


def _device(cell: CellSpec, me: RankIdentity) -> torch.device:
    return rank_device(
        me.local_rank, cell.device, cell.dist_backend
    )  # the one device rule (harness/contracts/devices.py)


def _build(cell: CellSpec, me: RankIdentity, device: torch.device):
    """(workload spec, model, facts, batch) of this rank: same seed everywhere, own synthetic batch."""
    spec = WORKLOADS.get(cell.workload)
    torch.manual_seed(cell.seed)
    model = spec.build().to(device)
    model.train()
    facts = {"params": count_params(model), "grad_bytes": grad_bytes(model)}
    if me.rank == 0:
        facts["flops_per_sample"] = flops_per_sample(spec, model, cell.seq_len, device)
    batch = spec.make_batch(cell.batch, seq_len=cell.seq_len, device=device, seed=cell.seed + 1000 + me.rank)
    return spec, model, facts, batch


def _iterations(cell: CellSpec, scheme) -> tuple[int, int]:
    """(warm-up, measured) iterations. Schemes that profile their first iterations (WFBP order, MG-WFBP
    timings) run them as BSP: those iterations are never measured, whatever warm-up was asked for."""
    steps = int(os.environ.get("DDLBENCH_STEPS", "0"))  # lossless tests: exact step count, no warm-up
    profiled = scheme.profile_iters if scheme.profiling else 0
    return (0, steps) if steps else (max(cell.warmup, profiled), cell.iters)


def _measure(cell: CellSpec, me: RankIdentity, transport, run: tuple, iters: int, device, barrier):
    """(samples, measured iterations, how it stopped) of the timing loop: `iters` iterations as always, or
    with a precision the stop rule's blocks (harness/measure/stoprule.py), every rank to the same iteration
    ({} for a fixed cell). `run`: the model, scheme, loss function, batch and warm-up iterations."""
    decision = _decision(cell, me, transport)
    fault = _fault(cell, me.rank)
    if decision is None:
        return run_loop(*run, iters, device, barrier, fault), iters, {}
    samples, reason = run_until_precise(*run, decision, device, barrier, fault)
    stop = {"stop_reason": reason, "precision": decision.rule.precision}
    if decision.rule.audit:  # where the rule would have stopped (the honesty check, experiments/stop_rule/)
        stop["audit_stopped_at"] = decision.stopped_at
        if decision.stopped_at is not None:  # it did reach its precision; the iterations after are the audit's
            stop["stop_reason"] = "reached"
    return samples, len(samples), stop


def _decision(cell: CellSpec, me: RankIdentity, transport) -> BlockDecision | None:
    """The stop rule's block decision of a precision cell (None: a fixed cell, or a lossless test's exact
    DDLBENCH_STEPS), deciding over the cell's own process group (README, "Measuring")."""
    if cell.precision is None or os.environ.get("DDLBENCH_STEPS"):
        return None
    rule = StopRule(cell.precision, *stop_bounds(cell), audit=os.environ.get(AUDIT_VAR) == "1")
    if transport is None:  # one rank: its own times are the slowest
        return BlockDecision(rule, me.rank, lambda x: [x], lambda v: v)
    return BlockDecision(rule, me.rank, transport.gather_object, transport.broadcast_object)


PIN_VAR = "DDLBENCH_PIN_RANKS"
"""1: each CPU worker runs on cores of its own (the spread study: experiments/spread/spread.py, variant `pin`)."""


def pin_cores(cell: CellSpec, me: RankIdentity) -> list[int]:
    """With PIN_VAR=1, a CPU worker pinned to `threads` cores of its own, the local rank's share of the cores this
    process may use, when every local rank's threads fit; the cores pinned to ([] when not pinned)."""
    if os.environ.get(PIN_VAR) != "1" or cell.device != "cpu" or not sys.platform.startswith("linux"):
        return []
    cores = sorted(os.sched_getaffinity(0))
    first = me.local_rank * cell.threads
    if me.local_world_size * cell.threads > len(cores) or first + cell.threads > len(cores):
        return []
    mine = cores[first : first + cell.threads]
    os.sched_setaffinity(0, mine)
    return mine


def run_worker(cell: CellSpec, me: RankIdentity, out: Path) -> dict | None:
    precision = set_precision(cell.dtype)  # once, before anything computes; the result records these flags
    deterministic()
    entry = SCHEMES.get(cell.scheme)
    backend = backends.load().get(cell.backend)
    if me.rank >= cell.workers:  # a parameter server
        backend.serve(cell, me)
        return None
    device = _device(cell, me)
    pinned = pin_cores(cell, me)
    # large tensors reused, not mapped anew each iteration: CPU cells only (harness/measure/host_heap.py)
    heap = host_heap.keep() if device.type == "cpu" else host_heap.DEFAULT
    transport = backend.start(cell, me, device) if entry.communicates else None
    if transport is not None:  # a CUDA cell on gloo by accident would be 10-100x off: one line, not a number
        check_group_backend(device.type, cell.dist_backend, transport.facts.get("dist_backend", ""))
    t_start = time.perf_counter()
    spec, model, facts, batch = _build(cell, me, device)
    # a traced cell (docs/ARCHITECTURE.md, "Traces"); untraced, nothing of it exists
    tracer = Tracer(cell.trace_iters, me.rank) if cell.trace_iters else None
    traced = tracer.transport(transport) if tracer and transport else transport
    log = lambda msg: print(f"[rank {me.rank}] {msg}", flush=True)
    ctx = SchemeContext(
        transport=traced,
        rank=me.rank,
        workers=cell.workers,
        device=device,
        knobs=entry.make_knobs(cell.knobs),
        make_optimizer=make_optimizer,
        log=log,
        dtype=cell.dtype,
    )
    scheme = entry.cls(ctx)
    fwd = scheme.setup(model)
    barrier = transport.barrier if transport is not None else (lambda: None)
    warmup, iters = _iterations(cell, scheme)
    counting = me.local_rank == 0  # one rank per node reads the node's interface counters
    before = read_counters() if counting else {}
    loss_fn = spec.loss if scheme.native_precision else autocast_loss(spec.loss, cell.dtype, device)
    loss_fn = _dropped_gradient(me.rank, loss_fn)
    if tracer is not None:
        scheme, barrier = tracer.attach(fwd, model, scheme, barrier)
    started = startup_s(time.time())  # the first warm-up iteration starts now
    run = (fwd, scheme, loss_fn, batch, warmup)
    samples, iters, stop = _measure(cell, me, transport, run, iters, device, barrier)
    net = _net_bytes(before, read_counters() if counting else {}, warmup + iters)
    # one worker still pushes and pulls through its servers; one all-reduce rank moves nothing
    comm_only = scheme.probe_comm() if (transport is not None and (cell.workers > 1 or cell.servers)) else 0.0
    if os.environ.get("DDLBENCH_DUMP_PARAMS"):
        torch.save(scheme.final_parameters(model), out / f"params.rank{me.rank}.pt")
    mine = {
        "rank": me.rank,
        "host": socket.gethostname(),
        "device_name": device_name(device),
        "samples": samples,
        "comm_only_s": comm_only,
        "setup_s": time.perf_counter() - t_start,
        "net_bytes_per_iter": net,
        "host_heap": heap,
        "pinned_cores": pinned,
        **started,
        **(transport.facts if transport is not None else {}),
    }
    gathered = transport.gather_object(mine) if transport is not None else [mine]
    if tracer is not None:
        tracer.write(transport, out, cell.cell_id)
    plan = {
        **scheme.describe(),
        **(transport.describe() if transport is not None else {}),
        **precision_plan(cell, entry, scheme, device),
    }
    result = (
        None
        if me.rank != 0
        else _result(cell, me, entry, scheme, backend, facts, gathered, plan, precision, warmup, iters, stop)
    )
    if result is not None:  # before the group is torn down: NCCL's teardown can hang
        write_json_atomic(out / "result.json", result)
    # every rank's samples are in rank 0's result: a teardown that hangs (NCCL's destroy_process_group
    # when a peer has gone) must not hold the cell until its timeout and fail it
    bounded(lambda: _teardown(scheme, transport), TEARDOWN_S, "teardown")
    return result


def startup_s(now: float) -> dict:
    """{"startup_s": seconds from the launcher placing the cell's ranks (PLACED_AT_VAR) to `now`, this
    rank's first warm-up iteration}: what starting a rank costs (interpreter, imports, process group,
    model), and how it was started (RANK_START_VAR: warm | cold); {} when the launcher did not set it."""
    try:
        placed = float(os.environ[PLACED_AT_VAR])
    except (KeyError, ValueError):
        return {}
    return {"startup_s": now - placed, "rank_start": os.environ.get(RANK_START_VAR, "cold")}


TEARDOWN_S = 30.0
"""Seconds a rank waits for its scheme and process group to shut down once the results are gathered."""


def _teardown(scheme, transport) -> None:
    scheme.shutdown()
    if transport is not None:
        transport.shutdown()


def precision_plan(cell: CellSpec, entry, scheme, device: torch.device) -> dict:
    """How the cell's dtype was applied, for the row's plan (docs/ARCHITECTURE.md, "Precision"): the
    dtype, what ran the low-precision compute (torch.autocast on the device, or the scheme's framework
    itself), and the dtype gradients were reduced in. `entry` is the scheme's registry entry."""
    if cell.dtype == "fp32":
        compute = "fp32"
    elif scheme.native_precision:
        compute = f"{scheme.name}'s own {cell.dtype} mode"
    else:
        compute = f"torch.autocast({device.type}, {DTYPES[cell.dtype]}) over forward+loss, fp32 parameters"
    reduced = scheme.reduce_dtype() if entry.communicates else ""  # local reduces nothing
    return {"dtype": cell.dtype, "precision": compute, "reduce_dtype": reduced}


def _net_bytes(before: dict, after: dict, iterations: int) -> dict:
    """Bytes per iteration (received, sent) through each interface of this node that carried any, over the
    warm-up and measured iterations (the counters cannot tell them apart)."""
    delta = counter_delta(before, after)
    return {name: [rx / iterations, tx / iterations] for name, (rx, tx) in delta.items() if rx or tx}


def _result(cell, me, entry, scheme, backend, facts, gathered, plan, precision, warmup, iters, stop) -> dict:
    """Rank 0's result.json; `stop`: how a precision cell's stop rule ended ({} for a fixed cell)."""
    return {
        "cell": json.loads(cell.to_json()),
        "ranks": gathered,
        "facts": {
            **facts,
            "comm_bytes_per_iter": scheme.comm_bytes_per_iter() if entry.communicates else 0,
            "gpu_models": gpu_models(r.get("device_name", "") for r in gathered),  # every rank's GPU
            **precision,
        },
        "plan": plan,
        "versions": backend.versions(),
        "dist": {"source": me.source, "nodes": me.nodes, "local_world_size": me.local_world_size, **me.extra},
        "effective": {"warmup": warmup, "iters": iters, **stop},
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m harness.rank.worker")
    ap.add_argument("--cell", required=True, help="cell spec JSON file")
    ap.add_argument("--out", required=True, help="cell directory (result.json lands here)")
    a = ap.parse_args(argv)
    crash_stacks()
    cell = CellSpec.from_json(Path(a.cell).read_text())
    if cell.device == "cpu":
        torch.set_num_threads(cell.threads)
    backends.load()  # first: who this rank is may be its framework launcher's word (BackendLaunch.identity)
    me = from_environ()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    try:
        run_worker(cell, me, out)
    except UserError as e:  # one line the launcher puts in the failed cell's reason (procs/crash.py)
        print(f"error: {e}", file=sys.stderr, flush=True)
        return 2
    return _shutdown_fault(me.rank, out)


def _shutdown_fault(rank: int, out: Path) -> int:
    """Fault injection for tests: DDLBENCH_FAULT=shutdown:RANK fails that rank (exit 1) once rank 0's
    result.json is on disk, as a rank failing in teardown would (procs/supervisor.py, Shutdown)."""
    if os.environ.get("DDLBENCH_FAULT", "") != f"shutdown:{rank}":
        return 0
    deadline = time.monotonic() + 60
    while not (out / "result.json").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    print("RuntimeError: injected fault: shutdown (Connection closed by peer)", file=sys.stderr, flush=True)
    return 1


if __name__ == "__main__":
    exit_now(main())
