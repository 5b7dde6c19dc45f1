"""The job secret of the nodes launcher (harness/launchers/nodes/secret.py): a cell/N is signed over its exact
bytes and its number, checked before it is parsed; a forged, unsigned, replayed or foreign one is refused in one
line naming the store; the secret file is refused when unreadable, empty, short or writable by everyone; the
ranks never inherit the secret."""

from __future__ import annotations

import json
import os

import pytest

from harness.core.errors import UserError
from harness.launchers.nodes import secret as s
from harness.procs.env import SECRET_VAR, base_env

KEY = b"k" * 32
STORE = "10.0.0.1:29400"
VALUE = {"cell": {"workload": "bert-base-tiny"}, "port": 1234, "nodes": [0, 1], "master": "10.0.0.1"}


def _open(raw: bytes, n: int = 0, node: int = 1, nonce: str = "n1", secret: bytes | None = KEY) -> dict:
    return s.open_sealed(secret, raw, n, node, nonce, STORE)


def test_a_signed_cell_opens_on_the_node_whose_nonce_it_names():
    raw = s.seal(KEY, 0, VALUE, {1: "n1", 2: "n2"})
    assert {k: v for k, v in _open(raw).items() if k != "nonces"} == VALUE
    assert _open(raw, node=2, nonce="n2")["port"] == 1234


@pytest.mark.parametrize(
    "raw, n, nonce, secret, why",
    [
        (s.seal(None, 0, VALUE, {1: "n1"}), 0, "n1", KEY, "it is not signed and this node has a job secret"),
        (s.seal(b"x" * 32, 0, VALUE, {1: "n1"}), 0, "n1", KEY, "its signature does not match"),
        (s.seal(KEY, 0, VALUE, {1: "n1"}), 1, "n1", KEY, "its signature does not match"),  # cell/0 replayed as 1
        (s.seal(KEY, 0, VALUE, {1: "old"}), 0, "n1", KEY, "signed for another job"),  # an earlier job's
        (s.seal(KEY, 0, VALUE, {1: "n1"}), 0, "n1", None, "it is signed and this node has no job secret"),
        (json.dumps(VALUE).encode(), 0, "n1", KEY, "not a cell written by ddlbench"),
        (b"", 0, "n1", None, "not a cell written by ddlbench"),
    ],
)
def test_a_cell_that_cannot_be_trusted_is_refused_in_one_line(raw, n, nonce, secret, why):
    with pytest.raises(s.CellRefused) as e:
        _open(raw, n=n, nonce=nonce, secret=secret)
    line = str(e.value)
    assert "\n" not in line and why in line and STORE in line and "nothing was run" in line
    assert f"refused cell {n} from the store at {STORE}" in line


def test_a_changed_byte_of_the_body_breaks_the_signature_and_is_never_parsed():
    raw = s.seal(KEY, 3, VALUE, {1: "n1"})
    head, body = raw.split(b"\n", 1)
    tampered = head + b"\n" + body.replace(b"10.0.0.1", b"10.6.6.6")
    with pytest.raises(s.CellRefused, match="signature does not match"):
        _open(tampered, n=3)
    with pytest.raises(s.CellRefused, match="signature does not match"):  # not JSON: refused before parsing
        _open(head + b"\n" + b"\x80\x04not json", n=3)


def test_without_a_secret_an_unsigned_cell_opens():
    assert _open(s.seal(None, 0, VALUE, {}), secret=None)["master"] == "10.0.0.1"


def test_the_secret_comes_from_the_file_then_the_variable(tmp_path):
    f = tmp_path / "secret"
    f.write_text("a" * 40 + "\n")
    f.chmod(0o600)
    assert s.read_secret(f, {SECRET_VAR: "b" * 40}) == b"a" * 40  # the flag wins
    assert s.read_secret(None, {SECRET_VAR: "b" * 40}) == b"b" * 40
    assert s.read_secret(None, {}) is None
    f.chmod(0o644)  # Kubernetes' default mode for a mounted Secret
    assert s.read_secret(f, {}) == b"a" * 40


@pytest.mark.parametrize(
    "content, mode, words",
    [
        (None, 0o600, "cannot read the job secret file"),
        ("\n", 0o600, "is empty"),
        ("short", 0o600, "holds 5 bytes, fewer than 16"),
        ("a" * 40, 0o666, "writable by every user"),
    ],
)
def test_a_bad_secret_file_is_one_line(tmp_path, content, mode, words):
    f = tmp_path / "secret"
    if content is not None:
        f.write_text(content)
        f.chmod(mode)
    with pytest.raises(UserError, match=words) as e:
        s.read_secret(f, {})
    assert "\n" not in str(e.value)


def test_an_empty_variable_is_refused():
    with pytest.raises(UserError, match=f"{SECRET_VAR} is empty"):
        s.read_secret(None, {SECRET_VAR: " "})


def test_ranks_never_inherit_the_secret(monkeypatch):
    monkeypatch.setenv(SECRET_VAR, "c" * 40)
    env = base_env(1, "nodes")
    assert SECRET_VAR not in env and os.environ[SECRET_VAR] == "c" * 40
