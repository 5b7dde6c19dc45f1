"""What the nodes write back (harness/launchers/nodes/secret.py, meeting.Notes): a cell's outcome and a failure's
reason are notes signed by their writer with the job secret and its nonce, read only when the signature holds, so
a stranger on the store's port cannot put an outcome or a reason in a row; and node 0's store listens on the
master address alone where that is one of node 0's own addresses (meeting.store_address), as `ss` shows."""

from __future__ import annotations

import datetime
import socket
import subprocess

import pytest
import torch.distributed as dist

from harness.launchers.nodes import secret as s
from harness.launchers.nodes.env import NodeJob
from harness.launchers.nodes.meeting import Notes, open_store, store_address
from harness.procs.ports import free_port

KEY = b"k" * 32
OUT = {"ok": True, "reason": "", "log_tail": ""}


@pytest.fixture
def store():
    port = free_port("127.0.0.1")
    lead = open_store(NodeJob(2, 0, 1, "127.0.0.1", port, "flags"), 10)
    yield lead, port


def _stranger(port: int) -> dist.TCPStore:
    """Anyone who reaches the port: a plain c10d client."""
    return dist.TCPStore("127.0.0.1", port, is_master=False, timeout=datetime.timedelta(seconds=10))


@pytest.mark.parametrize("secret", [KEY, None], ids=["signed", "open"])
def test_a_nodes_outcome_reaches_node_0_as_written(store, secret):
    lead, port = store
    leader, node1 = Notes(lead, secret, 0, "n0"), Notes(_stranger(port), secret, 1, "n1")
    leader.know({1: "n1"})
    node1.know({0: "n0"})
    node1.put("done/0/1", {**OUT, "ok": False, "reason": "rank 1 exited 1"})
    leader.put("fail/0", {"reason": "node 0: rank 0 exited 1"})
    assert leader.get("done/0/1")["reason"] == "rank 1 exited 1"
    assert node1.get("fail/0") == {"reason": "node 0: rank 0 exited 1"}
    assert leader.get("done/1/1") is None and not leader.forged  # not written yet: no note, nothing forged


def _forgeries(secret):
    yield "plain JSON", b'{"ok": true, "reason": "", "log_tail": ""}'
    yield "unsigned", s.sign_note(None, "done/0/1", 1, "n1", OUT)
    yield "another secret", s.sign_note(b"x" * 32, "done/0/1", 1, "n1", OUT)
    yield "an earlier job's nonce", s.sign_note(secret, "done/0/1", 1, "old", OUT)
    yield "another key's note", s.sign_note(secret, "done/7/1", 1, "n1", OUT)
    yield "a writer nobody knows", s.sign_note(secret, "done/0/1", 9, "n1", OUT)


@pytest.mark.parametrize("what", [w for w, _ in _forgeries(KEY)])
def test_a_strangers_outcome_is_not_read_and_is_named(store, what):
    lead, port = store
    leader = Notes(lead, KEY, 0, "n0")
    leader.know({1: "n1"})
    _stranger(port).set("done/0/1", dict(_forgeries(KEY))[what])
    assert leader.get("done/0/1") is None
    assert leader.forged == ["done/0/1"]
    why = leader.stranger()
    assert "\n" not in why and "done/0/1" in why and "not written by this job's nodes" in why


def test_without_a_secret_a_signed_note_is_not_read_either(store):
    lead, port = store
    leader = Notes(lead, None, 0, "n0")
    leader.know({1: "n1"})
    _stranger(port).set("done/0/1", s.sign_note(KEY, "done/0/1", 1, "n1", OUT))
    assert leader.get("done/0/1") is None


def _listening(port: int) -> list[str]:
    lines = subprocess.run(["ss", "-Hltn", f"sport = :{port}"], capture_output=True, text=True, check=True).stdout
    return [line.split()[3].rsplit(":", 1)[0] for line in lines.splitlines() if line.strip()]


def test_node_0s_store_listens_on_the_master_address_alone(store):
    _, port = store
    assert _listening(port) == ["127.0.0.1"]


def test_a_name_that_resolves_to_loopback_or_elsewhere_listens_everywhere():
    assert store_address("127.0.0.1") == "127.0.0.1"  # every node on one box
    assert store_address("nonexistent.invalid") is None
    assert store_address("198.51.100.9") is None  # TEST-NET-2: no node of ours has it
    host = socket.gethostname()
    ips = {info[4][0] for info in socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)}
    if any(ip.startswith("127.") or ip == "::1" for ip in ips) or len(ips) != 1:
        assert store_address(host) is None  # Debian's 127.0.1.1 for the hostname: the others arrive elsewhere
