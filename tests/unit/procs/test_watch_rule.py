"""The one supervisor's rule for naming a failed cell's cause (harness/procs/supervisor.py): the process
that ended first, by the time its zygote reaped it where known (warm ranks report their exits through it,
so a peer that died of the loss may be reported before the rank that crashed), else by when the
supervisor first saw it; a helper step that ended early stays the cause when the main processes end."""

from __future__ import annotations

from harness.procs.supervisor import Ended, Proc, _first_to_fail


class FakeProc:
    def __init__(self, code, ended_at=None):
        self.code, self.ended_at = code, ended_at

    def poll(self):
        return self.code


def proc(rank: int, popen: FakeProc, main: bool = True) -> Proc:
    return Proc(
        popen, f"rank {rank}", f"rank{rank}.log", lambda code, r=rank: Ended(f"rank {r} died ({code})", r), main
    )


def test_the_rank_that_ended_first_is_the_cause_not_the_peer_that_lost_it():
    # rank 0 (exit 1, "connection closed") was reaped after rank 1 (the crash, exit 17)
    e = _first_to_fail([proc(0, FakeProc(1, ended_at=10.5)), proc(1, FakeProc(17, ended_at=10.2))], {}, set())
    assert (e.reason, e.rank) == ("rank 1 died (17)", 1)


def test_without_exit_times_the_first_seen_then_the_lowest_rank():
    e = _first_to_fail([proc(0, FakeProc(None)), proc(1, FakeProc(-9))], {}, set())
    assert e.rank == 1
    e = _first_to_fail([proc(0, FakeProc(1)), proc(1, FakeProc(17))], {}, set())
    assert e.rank == 0  # seen together: the order decides


def test_a_helper_that_ended_early_stays_the_cause_when_the_workers_finish_meanwhile(monkeypatch):
    from harness.procs import supervisor as watch

    workers, servers = FakeProc(None), FakeProc(0)
    procs = [proc(0, workers), proc(1, servers, main=False)]

    def settle(_s):  # the workers finish during the settle time
        workers.code = 0

    monkeypatch.setattr(watch.time, "sleep", settle)
    e = _first_to_fail(procs, {}, set())
    assert e.rank == 1
