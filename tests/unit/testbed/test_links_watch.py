"""The testbed's link watch (harness/testbed/links.py, `Watch`), fed the reads a running cell would get: a link
that stays down ends the cell at the second read, naming it; a reshaped link, a flap and a failed read do not;
the links are read once a second however often the supervisor asks, in one `ip` call (`ports`, its JSON canned
here: the real read is the cut of tests/integration/faults/test_faults_across_hosts.py); and the supervisor
(harness/procs/supervisor.py) ends a running process on the watch's word, long before the cell's timeout.

    pytest -q tests/unit/testbed/test_links_watch.py      # under a second
"""

from __future__ import annotations

import subprocess
import time

import pytest

from harness.procs.supervisor import Ended, Proc, watch
from harness.testbed import links
from harness.testbed.state import Host, TestbedState

UP = {
    "ddlb-h0": {"name": "ddlb-p0 in ddlb-sw", "state": "UP"},
    "ddlb-h1": {"name": "ddlb-p1 in ddlb-sw", "state": "UP"},
}
CUT = {**UP, "ddlb-h1": {"name": "ddlb-p1 in ddlb-sw", "state": "DOWN"}}


class Reads:
    """`ports`' answers in turn (the last one again and again); counts the reads."""

    def __init__(self, *answers: dict):
        self.answers, self.count = list(answers), 0

    def __call__(self) -> dict:
        self.count += 1
        return self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]


def _asked(reads: Reads, seconds: int) -> tuple[list[str | None], links.Watch]:
    """The watch asked 20 times a second (as the supervisor's poll asks it) for `seconds`, on a clock the test
    moves: its answer at the end of each second, or the reason it gave, where it stopped."""
    now = [0.0]
    w = links.Watch(reads, every_s=1.0, clock=lambda: now[0])
    said = []
    for tick in range(20 * seconds):
        now[0] = tick / 20
        why = w()
        if why:
            return [*said, why], w
        if tick % 20 == 19:
            said.append(None)
    return said, w


def test_a_link_that_stays_down_ends_the_cell_at_the_second_read_naming_it():
    reads = Reads(UP, UP, CUT)  # cut between the reads at 1 s and 2 s
    said, w = _asked(reads, 10)
    assert said[:3] == [None, None, None] and len(said) == 4, said  # down at 2 s, still down at 3 s: ended
    assert reads.count == 4
    assert said[3].startswith("host ddlb-h1's link went down during the cell (ddlb-p1 in ddlb-sw: DOWN at two reads")
    assert "ddlb-h0" not in said[3] and "`--resume --retry-failed`" in said[3], said[3]
    assert w.flaps == []


def test_a_reshaped_link_reads_up_and_never_ends_the_cell():
    # `ports` reads states only: a tbf rate cut or a pfifo added leaves every end UP (the snapshots at the
    # cell's start and end flag it, harness/launchers/testbed/launcher.py)
    reads = Reads(UP)
    said, w = _asked(reads, 10)
    assert said == [None] * 10 and w.flaps == []
    assert reads.count == 10, "the links were read more than once a second"


def test_a_flap_does_not_end_the_cell_and_is_named_for_the_row():
    said, w = _asked(Reads(UP, CUT, UP), 5)  # down at one read, up at the next
    assert said == [None] * 5
    assert w.flaps == [
        "host ddlb-h1's link was down during the cell and up at the next read, 1 s later "
        "(ddlb-p1 in ddlb-sw: DOWN, then UP)"
    ]


def test_a_failed_read_between_two_down_reads_neither_ends_the_cell_nor_counts_as_up():
    said, w = _asked(Reads(UP, CUT, {}, CUT), 10)  # `ports` gives {} where its `ip` call failed
    assert said[:3] == [None, None, None] and said[3], said  # ended at the read after the failed one
    assert w.flaps == []


def test_the_supervisor_ends_a_running_cell_on_the_watchs_word(tmp_path):
    """A process that would run for a minute (a rank waiting on a link that is gone) is ended when the watch
    says so, within two reads, not at the cell's timeout."""
    rank = subprocess.Popen(["sleep", "60"])
    w = links.Watch(Reads(UP, CUT), every_s=0.2)
    t0 = time.monotonic()
    try:
        with pytest.raises(Ended) as ended:
            watch([Proc(rank, "rank 0", "rank0.log", lambda code: Ended("died", 0))], 60, tmp_path, None, abort=w)
    finally:
        rank.kill()
        rank.wait()
    assert time.monotonic() - t0 < 5
    assert ended.value.reason.startswith("host ddlb-h1's link went down during the cell")


def test_ports_reads_the_switch_ends_in_one_call_and_a_failed_read_is_unknown(monkeypatch):
    hosts = tuple(
        Host(i, f"ddlb-h{i}", f"/run/netns/ddlb-h{i}", "ddlb-eth0", f"10.77.0.{i + 1}", f"ddlb-p{i}") for i in range(3)
    )
    state = TestbedState("ddlb", 500.0, hosts, "ddlb-sw", "ddlb-br")
    switch = [
        {"ifname": "lo", "flags": ["LOOPBACK"], "operstate": "UNKNOWN"},
        {"ifname": "ddlb-p0", "flags": ["BROADCAST", "UP", "LOWER_UP"], "operstate": "UP"},
        {"ifname": "ddlb-p1", "flags": ["BROADCAST", "UP"], "operstate": "LOWERLAYERDOWN"},  # its peer set down
    ]  # ddlb-p2 is gone
    calls = []
    monkeypatch.setattr(links, "_json", lambda argv: calls.append(argv) or switch)
    assert links.ports(state, ["ddlb-h0", "ddlb-h1", "ddlb-h2"]) == {
        "ddlb-h0": {"name": "ddlb-p0 in ddlb-sw", "state": "UP"},
        "ddlb-h1": {"name": "ddlb-p1 in ddlb-sw", "state": "LOWERLAYERDOWN"},
        "ddlb-h2": {"name": "ddlb-p2 in ddlb-sw", "state": "ABSENT"},
    }
    assert calls == [["ip", "-n", "ddlb-sw", "-j", "link", "show"]]  # no tc: the shaping is not read
    assert list(links.ports(state, ["ddlb-h1"])) == ["ddlb-h1"]
    monkeypatch.setattr(links, "_json", lambda argv: [])  # the `ip` call hung or failed
    assert links.ports(state) == {}
