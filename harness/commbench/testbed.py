"""Check an emulated network with a real gloo all-reduce, one rank per emulated host, timed by the one
collective timer (harness.commbench: its rank loop, its rows) on the testbed's hosts, where the testbed's
launcher places them (chosen by name through harness/launchers/choose.py, as `ddlbench run --testbed` is).

    from harness.testbed import netns
    from harness.commbench import testbed as measure
    s = netns.up(2, "500mbit")
    measure.measure_allreduce_busbw(s)   # {'busbw_gbit_s': 0.47..., 'busbw_over_rate': 0.95..., ...}

busbw follows nccl-tests' convention (PERFORMANCE.md there; harness.measure.stats.busbw_factor):
algbw = S / t, busbw = algbw * 2(n-1)/n, the rate each rank's link must carry for a ring all-reduce;
it is comparable to the configured link rate. For n = 2, busbw == algbw.
"""

from __future__ import annotations

import statistics
import tempfile
from pathlib import Path

from harness.commbench.driver import commbench_cell, measure, network_of, testbed_or_here
from harness.core.errors import UserError
from harness.measure import stats
from harness.testbed import netns
from harness.testbed.state import TestbedState


def busbw_factor(n: int) -> float:
    """nccl-tests' all-reduce bus-bandwidth factor 2(n-1)/n (harness.measure.stats.busbw_factor). Pure."""
    return stats.busbw_factor("allreduce", n)


def measure_testbed(size_bytes: int, reps: int, hosts: int) -> dict:
    """`ddlbench testbed measure`: `measure_allreduce_busbw` on the testbed that is up, holding its lease."""
    s = netns.status()
    if s is None:
        raise UserError("no testbed is up: start one with `ddlbench testbed up --hosts 2 --rate 1gbit`")
    with netns.lease("ddlbench testbed measure"):
        return measure_allreduce_busbw(s, size_bytes=size_bytes, reps=reps, hosts=hosts)


def measure_allreduce_busbw(
    state: TestbedState,
    size_bytes: int = 32 * 2**20,
    reps: int = 5,
    hosts: int = 2,
    warmup: int = 2,
    timeout_s: float = 120.0,
) -> dict:
    """Time `reps` gloo all-reduces of `size_bytes` between ranks on hosts 0..hosts-1 (after `warmup`) of
    `state`, the testbed that is up (where its launcher runs them).

    Returns sizes, the raw per-rep times (slowest rank), and from their median algbw/busbw in Gbit/s
    (10^9 bit/s) with busbw_over_rate = busbw / configured rate. Raises CellFailed if a rank fails or
    the whole run exceeds `timeout_s` (then every rank is killed)."""
    if not 2 <= hosts <= len(state.hosts):
        raise UserError(
            f"cannot measure on {hosts} hosts: the testbed has {len(state.hosts)}; "
            f"give 2..{len(state.hosts)} or bring up more hosts"
        )
    launcher = testbed_or_here(testbed=True)
    cell = commbench_cell(
        hosts,
        "allreduce",
        [size_bytes],
        reps,
        warmup,
        network=network_of(launcher),
        timeout_s=timeout_s,
        nodes=launcher.nodes_for(hosts),
    )
    with tempfile.TemporaryDirectory(prefix="ddlbench-testbed-measure-") as tmp:  # private (0700)
        rows = measure(cell, Path(tmp) / "allreduce", "testbed-measure", launcher)
    times = rows.sort_values("rep")["time_s"].tolist()
    t = statistics.median(times)
    algbw = size_bytes * 8 / t / 1e9
    busbw = algbw * busbw_factor(hosts)
    return {
        "hosts": hosts,
        "size_bytes": size_bytes,
        "reps": reps,
        "times_s": times,
        "time_s_median": t,
        "algbw_gbit_s": algbw,
        "busbw_gbit_s": busbw,
        "rate_mbit": state.rate_mbit,
        "busbw_over_rate": busbw * 1e3 / state.rate_mbit,
    }
