"""ByteScheduler's thread pattern under the GIL, timed on this machine: what a thread that needs the GIL waits
while another Python thread spins.

In the study's ByteScheduler-A2A (bytescheduler/pytorch/horovod.py, ScheduledOptimizer) every rank runs a
poller thread that loops over a queue of in-flight work - `item = queue.get(); poll(item) or queue.put(item)` -
for as long as anything is in flight. On ranks other than 0 the items are Horovod handles, polled with
`horovod_torch_poll`, a pybind11 function that keeps the GIL (horovod v0.19 torch/mpi_ops_v2.cc); on rank 0 the
queue also holds ready events polled through ctypes (`CDLL`, which releases the GIL for the call). The
gradient hooks run on the autograd engine's device thread, which holds no GIL between hooks, and must take it
back for each hook; the training thread takes it for every Python step of the forward. This script rebuilds
that pattern with the same calls - a `queue.Queue` spinner whose poll keeps the GIL (ctypes `PyDLL`) or
releases it (`CDLL`), and a "hook" thread that works in C without the GIL (`usleep` through `CDLL`) then needs
it back - and times the wait for the GIL:

  handoff   the wait per hand-off against 1 or 2 spinning threads, per switch interval (sys.setswitchinterval),
            poll keeping or releasing the GIL, nothing ever completing;
  drain     the plugin's own rule: every hook submits an item that completes `done_ms` later, so the spinner
            blocks in `queue.get()` once the queue is empty; the wait per hook against min(done_ms, interval);
  autograd  the real thing on the CPU: a backward through torch's autograd engine whose AccumulateGrad nodes
            carry Python hooks (the plugin registers its hooks exactly there), beside a spinner that keeps the
            GIL and never runs dry; per trial, the backward's extra time per hook, in switch intervals. The
            hand-off is a race (does the spinner wake before the autograd thread wants the GIL again?), so a
            trial either waits at nearly every hook (the convoy) or almost never: the share of convoy trials
            and the waits per hook inside one are the figures;
  python    the plugin's Python per partition on the hook path (a ByteTask with its locks and description, a
            tensor slice, the queue put), per completed handle in the poller (get, poll, callback under a
            lock, `grad.set_`), one step of the `_sgd`/`_adam` name search over the parameter list (a
            tensor-keyed dict lookup pair and a string compare), and one torch op called from Python;
  forward   how often the training thread needs the GIL back: torch calls per forward layer of ResNet-50,
            BERT-Base and BERT-Large (a TorchFunctionMode count over one forward and loss).

    python scripts/reference/gil_handoff.py [--quick] [--out FILE.json]

It grounds the GIL and plugin inputs of the study's cluster (harness/study/inputs.py: `gil_forced_s`,
`gil_handoff_s`, `bs_task_py_s`, `bs_done_py_s`, `bs_scan_step_s`, `fwd_gil_per_layer`) as measurements of *this* host
and this CPython (the study ran CPython 3.6, whose interpreter is slower: the inputs keep ranges). Run it with nothing
else on the machine (check `uptime`): on a loaded core every wake-up also waits for the CPU.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import logging
import os
import platform
import queue
import statistics
import sys
import threading
import time

import torch
from torch.overrides import TorchFunctionMode

from workloads import WORKLOADS

LIBC_RELEASE = ctypes.CDLL(None)  # ctypes.CDLL releases the GIL around the call
LIBC_KEEP = ctypes.PyDLL(None)  # ctypes.PyDLL keeps it, as a pybind11 function without gil_scoped_release
_LOG = logging.getLogger("ByteScheduler")
"""The plugin's logger at its default level: its debug calls format their text and return."""
SWITCH_MS = (0.5, 1.0, 2.0, 5.0, 10.0)
"""Switch intervals tried; CPython's default is 5 ms (sys.getswitchinterval)."""
C_WORK_US = 100
"""The hook thread's work in C between two GIL acquisitions (kernel launches of one backward node)."""


def _spinner(q: queue.Queue, keep: bool, stop: threading.Event) -> None:
    poll = LIBC_KEEP.getpid if keep else LIBC_RELEASE.getpid
    while not stop.is_set():
        item = q.get()
        poll()
        q.put(item)


def handoff(switch_ms: float, keep: bool, spinners: int, n: int) -> dict:
    """Wait for the GIL after C work, against `spinners` threads that never stop polling."""
    old = sys.getswitchinterval()
    sys.setswitchinterval(switch_ms / 1000)
    stop = threading.Event()
    threads = []
    for _ in range(spinners):
        q: queue.Queue = queue.Queue()
        for k in range(4):
            q.put(k)
        t = threading.Thread(target=_spinner, args=(q, keep, stop), daemon=True)
        t.start()
        threads.append(t)
    time.sleep(0.02)
    waits = []
    for _ in range(n):
        t0 = time.perf_counter()
        LIBC_RELEASE.usleep(C_WORK_US)
        waits.append(time.perf_counter() - t0 - C_WORK_US * 1e-6)
    stop.set()
    for t in threads:
        t.join()
    sys.setswitchinterval(old)
    return {
        "switch_ms": switch_ms,
        "poll": "keeps GIL" if keep else "releases GIL",
        "spinners": spinners,
        "n": n,
        **_stats(waits),
    }


def drain(switch_ms: float, done_ms: float, n: int) -> dict:
    """The plugin's rule: each hook submits a handle done `done_ms` later; the poller (polls keeping the GIL)
    blocks in queue.get() once nothing is in flight. Wait per hook for the GIL."""
    old = sys.getswitchinterval()
    sys.setswitchinterval(switch_ms / 1000)
    q: queue.Queue = queue.Queue()

    def poller():
        while True:
            due = q.get()
            if due is None:
                return
            LIBC_KEEP.getpid()
            if time.perf_counter() < due:
                q.put(due)

    t = threading.Thread(target=poller, daemon=True)
    t.start()
    waits = []
    for _ in range(n):
        t0 = time.perf_counter()
        LIBC_RELEASE.usleep(C_WORK_US)
        waits.append(time.perf_counter() - t0 - C_WORK_US * 1e-6)
        q.put(time.perf_counter() + done_ms / 1000)  # the hook: allreduce_async_ and the queue put
    while not q.empty():
        time.sleep(0.001)
    q.put(None)
    t.join()
    sys.setswitchinterval(old)
    return {"switch_ms": switch_ms, "done_ms": done_ms, "n": n, **_stats(waits)}


def autograd_hooks(switch_ms: float, width: int, trials: int, layers: int = 40, reps: int = 3) -> dict:
    """Extra backward time per hooked layer beside a spinner that keeps the GIL (see the module docstring)."""
    old = sys.getswitchinterval()
    sys.setswitchinterval(switch_ms / 1000)
    torch.manual_seed(0)
    model = torch.nn.Sequential(*[torch.nn.Linear(width, width, bias=False) for _ in range(layers)])
    x = torch.randn(32, width)
    accs = []

    def hook(*_):  # a little Python, as a hook that hands a tensor over does
        sum(range(10))

    for p in model.parameters():  # the plugin's registration: ScheduledOptimizer._register_hooks
        acc = p.expand_as(p).grad_fn.next_functions[0][0]
        acc.register_hook(hook)
        accs.append(acc)

    def backward_s() -> float:
        loss = model(x).sum()
        t0 = time.perf_counter()
        loss.backward()
        return time.perf_counter() - t0

    backward_s()
    alone = statistics.median(backward_s() for _ in range(5))
    per_hook = []
    for _ in range(trials):
        stop = threading.Event()
        q: queue.Queue = queue.Queue()
        for k in range(4):
            q.put(k)
        t = threading.Thread(target=_spinner, args=(q, True, stop), daemon=True)
        t.start()
        time.sleep(0.005)
        spun = statistics.median(backward_s() for _ in range(reps))
        stop.set()
        t.join()
        per_hook.append(max(0.0, spun - alone) / layers)
    sys.setswitchinterval(old)
    intervals = [w / (switch_ms / 1000) for w in per_hook]
    convoy = [w for w in intervals if w > 0.5]
    return {
        "switch_ms": switch_ms,
        "width": width,
        "layers": layers,
        "trials": trials,
        "backward_alone_per_layer_s": alone / layers,
        "per_hook_intervals": intervals,
        "convoy_share": len(convoy) / trials,
        "convoy_intervals_per_hook": statistics.median(convoy) if convoy else 0.0,
        "mean_intervals_per_hook": statistics.fmean(intervals),
    }


class _Task:
    """What the plugin builds per partition (bytescheduler/common/bytetask.py ByteTask.__init__): its fields,
    a Lock, a Condition over a Lock, the description string, a logger.debug call."""

    def __init__(self, name, tensor, priority, parent=None, **kwargs):
        self.name = str(name)
        self.op = "allreduce"
        self.priority = int(priority) * 1000 if parent is None else int(priority)
        self.parent, self.kwargs, self.children = parent, kwargs, None
        self.partition_count, self.done_count = 1, 0
        self._done_count_lock = threading.Lock()
        self._tensor = tensor
        self._ready = self._started = self._finished = False
        self._lock_before_finish = threading.Condition(threading.Lock())
        self.desc = f"rank {1} step {7} task {self.op} {self.name}"
        _LOG.debug(f"{self.desc} was created")

    def partition_done(self):
        with self._done_count_lock:
            self.done_count += 1
            return self.done_count == self.partition_count


def python_costs(n: int) -> dict:
    """Seconds of Python per plugin step, each the median of `n` timed batches."""
    g = torch.zeros(4_000_000)
    q: queue.Queue = queue.Queue()

    def hook_partition():  # ByteTask for one partition, its tensor slice, the queue put (HorovodTask._do)
        t = _Task("Gradient.layer1.0.conv1.weight_0", g[0:1000], 3, parent=None, parameter=g)
        q.put((t, g, 1, None, t.partition_done))
        q.get()

    params = [torch.zeros(4) for _ in range(400)]
    names = {p: f"layer{i}.weight" for i, p in enumerate(params)}
    p_last = params[-1]

    def scan():  # ScheduledOptimizer._sgd/_adam: `for gp in group['params']` until the names match
        for gp in params:
            if names[p_last] != names[gp] or gp.shape != p_last.shape:
                continue
            break

    grad, out = torch.zeros(1000), torch.zeros(1000)
    lock = threading.Lock()

    def done():  # the poller on a finished handle: get, poll, callback under a lock, grad.set_
        q.put((p_last, grad, 5, None, None))
        _p, gr, _h, _ctx, _cb = q.get()
        LIBC_KEEP.getpid()
        with lock:
            pass
        gr.set_(out)

    a, b = torch.zeros(1), torch.zeros(1)
    out_costs = {
        "task_per_partition_s": _per_call(hook_partition, n, 50),
        "done_per_handle_s": _per_call(done, n, 50),
        "scan_step_s": _per_call(scan, n, 2) / len(params),
        "torch_op_s": _per_call(lambda: a.add_(b), n, 200),
    }
    return out_costs


class _Calls(TorchFunctionMode):
    """Counts torch calls made from Python (each one gives the GIL up for its C++ part and takes it back)."""

    def __init__(self):
        super().__init__()
        self.n = 0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        self.n += 1
        with torch._C.DisableTorchFunction():
            return func(*args, **(kwargs or {}))


def forward_calls(names=("resnet50", "bert-base", "bert-large")) -> dict:
    """Torch calls per layer with parameters in one forward and loss of each workload (batch 2, sequence 16)."""
    out = {}
    for name in names:
        spec = WORKLOADS.get(name)
        model = spec.build()
        layers = sum(1 for m in model.modules() if not list(m.children()) and list(m.parameters(recurse=False)))
        batch = spec.make_batch(2, **({} if spec.seq_len is None else {"seq_len": 16}))
        count = _Calls()
        with torch.no_grad(), count:
            spec.loss(model, batch)
        out[name] = {"torch_calls": count.n, "layers": layers, "per_layer": count.n / layers}
    return out


def _per_call(fn, n: int, batch: int) -> float:
    fn()
    runs = []
    for _ in range(n):
        t0 = time.perf_counter()
        for _ in range(batch):
            fn()
        runs.append((time.perf_counter() - t0) / batch)
    return statistics.median(runs)


def _stats(xs: list[float]) -> dict:
    s = sorted(xs)
    q = lambda f: s[min(len(s) - 1, int(f * len(s)))]
    return {"median_s": statistics.median(s), "mean_s": statistics.fmean(s), "p10_s": q(0.1), "p90_s": q(0.9)}


def run(quick: bool = False) -> dict:
    n = 15 if quick else 200
    switches = (1.0, 5.0) if quick else SWITCH_MS
    out = {
        "command": "python scripts/reference/gil_handoff.py" + (" --quick" if quick else ""),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cpus": os.cpu_count(),
        "load_before": os.getloadavg()[0],
        "c_work_us": C_WORK_US,
        "handoff": [],
        "drain": [],
    }
    for sw in switches:
        for keep in (True, False):
            for spinners in (1,) if quick else (1, 2):
                out["handoff"].append(handoff(sw, keep, spinners, n))
    for done_ms in (2.0,) if quick else (0.5, 2.0, 10.0):
        out["drain"].append(drain(5.0, done_ms, n))
    out["autograd"] = [autograd_hooks(5.0, w, 3 if quick else 20) for w in ((64,) if quick else (64, 256))]
    out["python_costs"] = python_costs(5 if quick else 30)
    out["forward"] = forward_calls(("resnet50",) if quick else ("resnet50", "bert-base", "bert-large"))
    out["load_after"] = os.getloadavg()[0]
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python scripts/reference/gil_handoff.py")
    ap.add_argument("--quick", action="store_true", help="a few seconds: fewer intervals and samples (tests)")
    ap.add_argument("--out", help="write the figures as JSON here")
    a = ap.parse_args(argv)
    res = run(a.quick)
    for h in res["handoff"]:
        print(
            f"handoff  switch {h['switch_ms']:>4} ms  poll {h['poll']:<13} spinners {h['spinners']}: "
            f"wait median {h['median_s'] * 1e3:.3f} ms  p10 {h['p10_s'] * 1e3:.3f}  p90 {h['p90_s'] * 1e3:.3f}"
        )
    for d in res["drain"]:
        print(
            f"drain    switch {d['switch_ms']} ms  in flight {d['done_ms']} ms: wait median "
            f"{d['median_s'] * 1e3:.3f} ms  mean {d['mean_s'] * 1e3:.3f}"
        )
    for g in res["autograd"]:
        print(
            f"autograd switch {g['switch_ms']} ms, {g['backward_alone_per_layer_s'] * 1e6:.0f} us a layer: "
            f"convoy in {g['convoy_share']:.0%} of {g['trials']} trials, {g['convoy_intervals_per_hook']:.2f} "
            f"intervals a hook inside one; mean {g['mean_intervals_per_hook']:.2f}"
        )
    for k, v in res["python_costs"].items():
        print(f"python   {k}: {v * 1e6:.2f} us")
    for k, v in res["forward"].items():
        print(f"forward  {k}: {v['torch_calls']} torch calls, {v['layers']} layers: {v['per_layer']:.2f} per layer")
    print(f"load {res['load_before']:.2f} before, {res['load_after']:.2f} after; CPython {res['python']}")
    if a.out:
        with open(a.out, "w") as f:
            json.dump(res, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
