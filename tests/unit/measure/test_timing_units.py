"""Unit tests of the device-dependent timing pieces, on the CPU (docs/ARCHITECTURE.md, "Timing loop"):
the phase timer (perf_counter, and the CUDA path with a fake event class), forward_wait_s, the completion
probe, the stager, the device rule, and ByteScheduler's credit window seen through its partition trace."""

from __future__ import annotations

import math
import threading
import time

import pytest
import torch
from scipy import (
    stats as st,  # the reference for describe()'s CI; the harness itself does not import it
)

from harness.backends.deepspeed.transport import deepspeed_local_rank
from harness.backends.torch_dist import handles as H
from harness.backends.torch_dist.staging import DEFER_VAR, Stager
from harness.contracts import devices
from harness.contracts.training import make_optimizer
from harness.contracts.transport import Handle
from harness.core.errors import UserError
from harness.measure import loop as loop_mod
from harness.measure.stats import describe
from harness.measure.timer import (
    Clock,
    CudaClock,
    ForwardWaits,
    IterationTimer,
    make_clock,
)
from harness.schemes import SCHEMES, SchemeContext
from harness.schemes.base import Scheme
from helpers import in_flight_peak


# --- a fake CUDA: one stream with its own timeline, events that count synchronisations ---------------
class FakeStream:
    """The device's timeline: `now` is where work issued next would start (the test advances it as work
    is issued); the device has finished everything up to `reached` (everything, unless a test holds it back)."""

    def __init__(self):
        self.now = 0.0
        self.reached = math.inf
        self.syncs = 0
        self.settles = 0


class FakeEvent:
    def __init__(self, stream: FakeStream, enable_timing: bool = False):
        assert enable_timing, "elapsed_time needs events created with enable_timing=True"
        self.stream, self.t = stream, None

    def record(self, stream: FakeStream) -> None:
        self.t = stream.now

    def query(self) -> bool:
        return self.t is not None and self.t <= self.stream.reached

    def synchronize(self) -> None:
        self.stream.syncs += 1
        self.stream.reached = max(self.stream.reached, self.t)

    def elapsed_time(self, end: FakeEvent) -> float:  # milliseconds, as torch.cuda.Event
        assert self.query() and end.query(), "read only events the device has reached"
        return (end.t - self.t) * 1000.0


def fake_cuda_clock() -> tuple[CudaClock, FakeStream]:
    s = FakeStream()

    def settle(_device) -> None:
        s.settles += 1
        s.reached = math.inf

    return CudaClock(torch.device("cpu"), event=lambda **kw: FakeEvent(s, **kw), stream=lambda _d: s, settle=settle), s


# --- timer ---------------------------------------------------------------------------------------------
def test_cpu_clock_phases_are_perf_counter_intervals():
    timer = IterationTimer(make_clock(torch.device("cpu")))
    timer.start_window()
    for _ in range(2):
        t0 = time.perf_counter()
        timer.begin()
        time.sleep(0.02)
        timer.phase("a")
        time.sleep(0.01)
        timer.phase("b")
        timer.end([])
        span = time.perf_counter() - t0
    rows = timer.finish()
    assert len(rows) == 2
    for r in rows:
        assert r["a"] >= 0.02 and r["b"] >= 0.01 and r["a_waited_s"] == 0.0
        assert r["a"] + r["b"] <= r["iter_s"] and r["host_issue_s"] <= r["iter_s"]
        assert r["device_lag_s"] < 1e-3, "on the CPU the clock is the host's"
    assert rows[1]["a"] + rows[1]["b"] <= span


def test_cuda_clock_reads_events_after_the_device_passed_them_and_never_waits_inside_the_window():
    clock, s = fake_cuda_clock()
    timer = IterationTimer(clock)
    waits = ForwardWaits(clock)
    timer.start_window()
    assert s.syncs == 1, "one anchor before the window"
    s.reached = -1.0  # the device falls behind: nothing issued from now on has finished
    for _ in range(3):
        timer.begin()
        s.now += 0.010  # forward kernels
        with waits.waiting():
            s.now += 0.004  # the stream idles while the CPU is blocked
        s.now += 0.001
        timer.phase("forward")
        s.now += 0.020
        timer.phase("backward_s")
        timer.end(waits.take())
        s.now += 0.002  # between iterations (the next iteration starts later)
    assert s.syncs == 1 and s.settles == 0, "no synchronisation inside the window"
    assert timer._read == [], "nothing read before the device passed it"
    s.reached = 0.037  # the device has finished the first iteration only
    timer.poll()
    assert len(timer._read) == 1 and "iter_s" not in timer._read[0], "its end is the next one's start"
    rows = timer.finish()
    assert s.settles == 1 and s.syncs == 2, "one synchronisation after the window"
    assert len(rows) == 3
    for r in rows:
        assert r["forward"] == pytest.approx(0.015) and r["backward_s"] == pytest.approx(0.020)
        assert r["forward_waited_s"] == pytest.approx(0.004)
        assert r["host_issue_s"] >= 0.0
    assert [r["iter_s"] for r in rows[:2]] == pytest.approx([0.037, 0.037]), "device start-to-start"
    assert rows[2]["iter_s"] == pytest.approx(0.037), "the last one ends at the idle device's mark"
    assert waits.take() == [], "take() forgets what it returned"


def test_cuda_events_come_from_a_reused_pool():
    clock, s = fake_cuda_clock()
    timer = IterationTimer(clock)
    timer.start_window()
    for _ in range(200):
        timer.begin()
        for name in ("forward", "backward_s", "comm_wait_s", "optimizer_s"):
            s.now += 0.001
            timer.phase(name)
        timer.end()
    rows = timer.finish()
    assert len(rows) == 200 and all(r["iter_s"] == pytest.approx(0.004) for r in rows)
    assert clock.created <= 12, f"{clock.created} events for 200 iterations: the pool is not reused"


def test_device_lag_tells_an_idle_device_from_one_running_behind():
    """Device time is placed on the host's time line by the anchor: a device that reaches each iteration's
    first mark as the host issues it waited for the host (host-bound); one 5 ms behind did not."""
    for backlog in (0.0, 0.005):
        clock, s = fake_cuda_clock()
        timer = IterationTimer(clock)
        s.now = time.perf_counter()
        timer.start_window()
        anchor_dev, anchor_host = s.now, timer._anchor[1]
        for _ in range(5):
            time.sleep(0.002)
            s.now = anchor_dev + (time.perf_counter() - anchor_host) + backlog  # where the device is
            timer.begin()
            s.now += 0.001
            timer.phase("step")
            timer.end()
        rows = timer.finish()
        lags = [r["device_lag_s"] for r in rows]
        assert max(lags) == pytest.approx(backlog, abs=1e-3), (backlog, lags)


def test_make_clock_is_perf_counter_on_cpu():
    assert type(make_clock(torch.device("cpu"))) is Clock
    assert isinstance(make_clock(torch.device("cuda", 0)), CudaClock)  # building it touches no device


# --- the loop: forward_wait_s and one synchronisation per iteration ----------------------------------
class Waiter(Scheme):
    """Plain training whose forward pre-hook blocks for `block_s` inside forward_wait (as ByteScheduler
    blocks for the previous iteration's partitions), and again outside forward (not forward's)."""

    block_s = 0.03

    def setup(self, model):
        model = super().setup(model)
        model.register_forward_pre_hook(self._pre)
        return model

    def _pre(self, _m, _a):
        with self.forward_wait():
            time.sleep(self.block_s)

    def before_backward(self):
        with self.forward_wait():  # after forward: must not count as forward's wait
            time.sleep(0.01)


def _ctx(device="cpu", workers=1, knobs=None, transport=None, scheme="local"):
    entry = SCHEMES.get(scheme)
    return SchemeContext(
        transport=transport,
        rank=0,
        workers=workers,
        device=torch.device(device),
        knobs=entry.make_knobs(knobs),
        make_optimizer=make_optimizer,
        log=lambda m: None,
    )


def _model_and_loss():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Linear(8, 1))
    batch = {"x": torch.randn(4, 8)}
    return model, (lambda m, b: m(b["x"]).sum()), batch


def test_loop_bills_forward_waits_to_forward_wait_s_and_phases_sum():
    model, loss_fn, batch = _model_and_loss()
    scheme = Waiter(_ctx())
    fwd = scheme.setup(model)
    samples = loop_mod.run_loop(fwd, scheme, loss_fn, batch, 1, 3, torch.device("cpu"), lambda: None)
    assert len(samples) == 3
    for s in samples:
        assert s["forward_wait_s"] >= Waiter.block_s * 0.9
        assert s["forward_s"] < s["forward_wait_s"], "the wait is not in forward_s"
        assert s["backward_s"] >= 0.01, "a wait after forward stays in its own phase"
        total = s["forward_s"] + s["forward_wait_s"] + s["backward_s"] + s["comm_wait_s"] + s["optimizer_s"]
        assert total <= s["iter_s"] + 1e-9


def test_loop_never_synchronises_inside_the_window_on_cuda_path(monkeypatch):
    clock, stream = fake_cuda_clock()
    monkeypatch.setattr(loop_mod, "make_clock", lambda _d: clock)
    model, loss_fn, batch = _model_and_loss()
    scheme = Scheme(_ctx())
    fwd = scheme.setup(model)
    samples = loop_mod.run_loop(fwd, scheme, loss_fn, batch, 2, 4, torch.device("cpu"), lambda: None)
    assert stream.syncs == 2 and stream.settles == 1, "the anchor before the window and one sync after it"
    assert len(samples) == 4 and [s["iteration"] for s in samples] == [0, 1, 2, 3]
    assert all(s["forward_wait_s"] == 0.0 and "host_issue_s" in s and "device_lag_s" in s for s in samples)


# --- completion probe ------------------------------------------------------------------------------
class FakeWork:
    def __init__(self, polls: int):
        self.polls, self.asked, self.waited = polls, 0, False

    def is_completed(self) -> bool:
        self.asked += 1
        return self.asked > self.polls

    def wait(self) -> bool:
        self.waited = True
        return True


def test_completion_probe_polls_until_the_operation_finished():
    works = [FakeWork(3), FakeWork(0)]
    H.wait_done(works)
    assert works[0].asked == 4 and works[1].asked == 1 and all(w.waited for w in works)


def test_nccl_credit_returns_only_on_completion():
    w = FakeWork(5)
    h = H.WorkHandle([w], poll=True)
    h.wait_sent()
    assert w.asked == 6 and w.waited
    h.wait()  # idempotent once finished


# --- stager ----------------------------------------------------------------------------------------
def test_cpu_stager_hands_the_tensor_itself(monkeypatch):
    monkeypatch.delenv(DEFER_VAR, raising=False)
    g = torch.arange(6.0).view(2, 3)
    st = Stager(torch.device("cpu")).stage(7, g)
    assert st.buf.data_ptr() == g.data_ptr() and not st.deferred and st.after is None
    st.wait_ready()
    monkeypatch.setenv(DEFER_VAR, "1")
    assert Stager(torch.device("cpu")).stage(7, g).deferred, "DDLBENCH_PS_DEFER=1 runs the GPU's deferred path"


# --- device rule -----------------------------------------------------------------------------------
@pytest.mark.parametrize("local_rank,visible,index", [(0, 1, 0), (3, 1, 0), (0, 4, 0), (3, 4, 3)])
def test_device_index(local_rank, visible, index):
    assert devices.device_index(local_rank, visible) == index


@pytest.mark.parametrize("local_rank,visible", [(0, 0), (2, 2), (5, 4)])
def test_device_index_refuses(local_rank, visible):
    with pytest.raises(UserError):
        devices.device_index(local_rank, visible)


def test_rank_device_sets_the_device(monkeypatch):
    chosen = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)  # --gpus-per-task=1: one visible device
    monkeypatch.setattr(torch.cuda, "set_device", chosen.append)
    assert devices.rank_device(1, "cuda") == torch.device("cuda", 0) and chosen == [torch.device("cuda", 0)]
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    assert devices.rank_device(1, "cuda") == torch.device("cuda", 1)
    assert devices.rank_device(1, "cpu") == torch.device("cpu") and len(chosen) == 2


def test_deepspeed_sees_the_chosen_ordinal_as_local_rank():
    assert deepspeed_local_rank(torch.device("cuda", 0), 1) == "0"  # per-task binding
    assert deepspeed_local_rank(torch.device("cpu"), 1) == "1"


# --- ByteScheduler's credit window through its partition trace -------------------------------------
class SlowHandle(Handle):
    """An all-reduce that takes `secs` (a thread finishes it), so partitions really are in flight."""

    def __init__(self, secs: float):
        self.done = threading.Event()
        threading.Timer(secs, self.done.set).start()

    def wait(self) -> None:
        self.done.wait()


class OneWorker:
    def allreduce_async(self, tensor, key, priority=0):
        return SlowHandle(0.01)


def test_credit_window_bounds_bytes_in_flight_and_waits_are_forward_waits(monkeypatch):
    monkeypatch.setenv("DDLBENCH_BS_TRACE", "1")
    torch.manual_seed(0)
    model = torch.nn.Sequential(*[torch.nn.Linear(64, 64) for _ in range(6)])  # 6 x 16.6 KB weights
    knobs = {"partition_mb": 8 / 1024, "credit_mb": 20 / 1024}  # 8 KB partitions, 20 KB credit
    scheme = SCHEMES.get("bytescheduler-a2a").cls(_ctx(knobs=knobs, transport=OneWorker(), scheme="bytescheduler-a2a"))
    fwd = scheme.setup(model)
    batch = {"x": torch.randn(4, 64)}
    samples = loop_mod.run_loop(
        fwd, scheme, lambda m, b: m(b["x"]).sum(), batch, 1, 3, torch.device("cpu"), lambda: None
    )
    trace = scheme.describe()["partition_trace"]
    scheme.shutdown()
    assert len(trace) == 4 * len(scheme.parts)
    assert all(end >= start + 0.005 for _, _, start, end in trace), "partitions take real time in flight"
    credit = 20 * 1024
    assert max(b for _, b, _, _ in trace) <= credit
    assert in_flight_peak(trace) <= credit
    assert in_flight_peak(trace) > max(b for _, b, _, _ in trace), "the window lets several go at once"
    assert any(s["forward_wait_s"] > 0 for s in samples), "the next forward waited for partitions"


# --- doctor: which GPU checks ran ----------------------------------------------------------------------
def test_doctor_says_which_gpu_checks_ran(monkeypatch):
    from harness.doctor import gpu_probe
    from harness.doctor.render import gpu_lines

    none = gpu_probe.run_gpu_checks(0)
    assert all(c["status"] == "not run: no CUDA device" and not c.get("ran") for c in none)
    assert "0 of" in gpu_lines(none)[0]
    monkeypatch.setattr(
        gpu_probe,
        "RUNNABLE",
        {
            "stream-correct timing": lambda d: "",
            "TF32 off for fp32": lambda d: 1 / 0,
            "device rule": lambda d: "left cuda:1",
        },
    )
    one = {c["name"]: c["status"] for c in gpu_probe.run_gpu_checks(1)}
    assert one["stream-correct timing"] == "ran: ok"
    assert one["TF32 off for fp32"].startswith("ran: FAILED (ZeroDivisionError")
    assert one["device rule"] == "ran: FAILED (left cuda:1)"
    assert one["NCCL credit window"].startswith("not run: needs 2 GPUs")


# --- the probe of a collective ------------------------------------------------------------------------
def test_probe_times_to_completion_and_drops_the_warm_up():
    from harness.measure.collective import probe_gradient_sync

    calls = []

    class Slow:
        def allreduce_async(self, tensor, key, priority=0):
            calls.append(key)
            h = SlowHandle(0.03 if len(calls) > 1 else 0.3)  # the warm-up is slow and must not count
            return h

    took = probe_gradient_sync(Slow(), torch.device("cpu"), 16, None, reps=3)
    assert len(calls) == 4 and 0.03 <= took < 0.3


# --- MG-WFBP's backward profile: clock marks in the gradient hooks ----------------------------------------
def test_backward_profile_reads_the_clock_marks_of_the_gradient_hooks():
    """With a clock whose marks are 1 ms apart (as events a stream reaches 1 ms apart), each gradient's
    ready time is its hook's mark, in hook order, and one synchronisation closes the profile."""

    class Ticking(CudaClock):
        def mark(self):
            self._stream(self.device).now += 0.001
            return super().mark()

    class Local:
        def allreduce_async(self, tensor, key, priority=0):
            return H.WorkHandle([])  # the torch backend's handle, its works already done

        def broadcast_object(self, obj, src=0):
            return obj

    s = FakeStream()
    scheme = SCHEMES.get("wfbp-a2a").cls(_ctx(transport=Local(), scheme="wfbp-a2a"))
    model, loss_fn, batch = _model_and_loss()
    fwd = scheme.setup(model)
    scheme._clock = Ticking(torch.device("cpu"), event=lambda **kw: FakeEvent(s, **kw), stream=lambda _d: s)
    scheme.before_backward()
    loss_fn(fwd, batch).backward()
    scheme.after_backward()
    ready = scheme._ready_at[-1]
    assert s.syncs == 1
    assert sorted(ready) == pytest.approx([0.001 * k for k in range(1, len(ready) + 1)])
    assert [ready[i] for i in scheme._order] == sorted(ready), "ready times follow the hooks' order"


def test_the_ci_of_the_mean_is_students_t():
    """describe()'s 95% CI is t_{0.975,n-1} * s / sqrt(n): 12.706 for two samples one apart from the
    mean, and the same as scipy.stats' t quantile at every n (harness/measure/stats.py)."""
    d = describe([1.0, 3.0])
    assert abs((d["ci95_high"] - d["mean"]) - 12.7062) < 1e-3
    for n in (2, 3, 6, 30, 200):
        x = [float(i % 7) for i in range(n)]
        d = describe(x)
        half = st.t.ppf(0.975, n - 1) * d["std"] / n**0.5
        assert abs((d["ci95_high"] - d["mean"]) - half) < 1e-9 * max(1.0, half)
