"""The job secret of a multi-node job without Slurm (README.md, "What listens"): node 0 signs every cell/N it
writes into the store, and a node refuses a cell/N whose signature it cannot check before it reads a byte
of it as JSON, so whoever reaches the store's port without the secret cannot send any node's ranks elsewhere.

Every node has the same secret: `--secret-file PATH` (a mounted Kubernetes Secret, a file Slurm or SkyPilot
shares), else the variable DDLBENCH_JOB_SECRET (a Secret given as a variable). Without one the store is
torchrun's: open to anyone who reaches it, said once in a warning.

A cell/N as stored (`seal`): one header line, then the body, the JSON the leader wrote:

    ddlbench-cell-v1 <HMAC-SHA256 hex | ->\\n<body>

The HMAC covers `cell/N` and the exact body bytes, so a recorded cell/0 written again as cell/1 fails; the
body names every node's nonce, a random word each node sends when it joins (node/K), so a cell signed for
an earlier job with the same secret fails on this one.

What the nodes write back and the rows keep, a cell's outcome (done/N/K) and a failure's reason (fail/N), is a
note signed the same way by its writer (`sign_note`), with the writer's nonce (node 0's is in every cell/N):

    ddlbench-note-v1 <writer> <HMAC-SHA256 hex | ->\n<body>

and a note whose signature fails is not read (`open_note` gives None): a stranger cannot put an outcome or a
reason in a row. node/K, beat/K, bye/K and `end` are plain JSON and carry nothing a row keeps or a node runs (a
stranger can stop the job, not steer it).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import stat
import sys
from collections.abc import Mapping
from pathlib import Path

from harness.core.errors import UserError
from harness.procs.env import SECRET_VAR

MAGIC = b"ddlbench-cell-v1"
"""The first word of every cell/N (the format's version)."""
UNSIGNED = b"-"
"""The signature field of a cell/N written without a secret."""
MIN_SECRET_BYTES = 16
"""The shortest secret taken (`openssl rand -hex 32` makes a good one)."""


class CellRefused(UserError):
    """A node refused a cell/N (bad or missing signature, a stranger's nonce): one line, nothing run."""


def read_secret(path: str | os.PathLike | None, environ: Mapping[str, str]) -> bytes | None:
    """The job secret: the file at `path` (the flag wins), else SECRET_VAR, else None. UserError (one line)
    for a file that cannot be read, is empty, is writable by every user, or a secret under
    MIN_SECRET_BYTES. A file readable by others is taken: Kubernetes mounts a Secret 0644 by default, inside
    the pod's own filesystem."""
    if path is not None:
        where, value = f"the job secret file {path}", _read_file(path)
    elif SECRET_VAR in environ:
        where, value = SECRET_VAR, environ[SECRET_VAR].strip().encode()
    else:
        return None
    if not value:
        raise UserError(f"{where} is empty; write the same secret on every node (openssl rand -hex 32)")
    if len(value) < MIN_SECRET_BYTES:
        raise UserError(
            f"{where} holds {len(value)} bytes, fewer than {MIN_SECRET_BYTES}; make a longer one (openssl rand -hex 32)"
        )
    return value


def _read_file(path: str | os.PathLike) -> bytes:
    """The secret file's bytes, stripped; UserError for a file that cannot be read or that anyone may write."""
    try:
        if os.stat(path).st_mode & stat.S_IWOTH:
            raise UserError(
                f"the job secret file {path} is writable by every user, so anyone on this box could change it; "
                f"chmod o-w {path}"
            )
        return Path(path).read_bytes().strip()
    except OSError as e:
        raise UserError(
            f"cannot read the job secret file {path} ({e.strerror or e}); give every node the same readable file"
        ) from None


def _mac(secret: bytes, n: int, body: bytes) -> bytes:
    return hmac.new(secret, MAGIC + b"\n" + f"cell/{n}\n".encode() + body, hashlib.sha256).hexdigest().encode()


def seal(secret: bytes | None, n: int, value: dict, nonces: Mapping[int, str]) -> bytes:
    """cell/N as node 0 stores it: `value` and every node's nonce as JSON, signed when there is a secret."""
    body = json.dumps({**value, "nonces": {str(k): v for k, v in nonces.items()}}, sort_keys=True).encode()
    return MAGIC + b" " + (_mac(secret, n, body) if secret else UNSIGNED) + b"\n" + body


def open_sealed(secret: bytes | None, raw: bytes, n: int, node: int, nonce: str, store: str) -> dict:
    """The value of cell/N as node `node` (whose nonce is `nonce`) may use it: the signature is checked
    before the body is parsed. CellRefused naming the store's address `store` for anything else."""
    head, _, body = raw.partition(b"\n")
    magic, _, mac = head.partition(b" ")

    def refuse(why: str) -> CellRefused:
        return CellRefused(
            f"node {node} refused cell {n} from the store at {store}: {why}; nothing was run (give every node "
            f"the same --secret-file or {SECRET_VAR}, and keep strangers off that port)"
        )

    if magic != MAGIC or not mac:
        raise refuse("it is not a cell written by ddlbench's node 0 (a stranger's, or another version's)")
    if secret is None:
        if mac != UNSIGNED:
            raise refuse("it is signed and this node has no job secret")
    elif mac == UNSIGNED:
        raise refuse("it is not signed and this node has a job secret")
    elif not hmac.compare_digest(mac, _mac(secret, n, body)):
        raise refuse("its signature does not match this node's job secret")
    value = json.loads(body)
    if secret is not None and value.get("nonces", {}).get(str(node)) != nonce:
        raise refuse("it was signed for another job (not this node's nonce): a replay")
    return value


NOTE = b"ddlbench-note-v1"
"""The first word of every signed note (done/N/K, fail/N)."""


def _note_mac(secret: bytes, key: str, nonce: str, body: bytes) -> bytes:
    msg = NOTE + b"\n" + key.encode() + b"\n" + nonce.encode() + b"\n" + body
    return hmac.new(secret, msg, hashlib.sha256).hexdigest().encode()


def sign_note(secret: bytes | None, key: str, writer: int, nonce: str, value: dict) -> bytes:
    """The note `value` as node `writer` (whose nonce is `nonce`) stores it under `key`: signed when there is a
    secret."""
    body = json.dumps(value, sort_keys=True).encode()
    mac = _note_mac(secret, key, nonce, body) if secret else UNSIGNED
    return NOTE + b" " + str(writer).encode() + b" " + mac + b"\n" + body


def open_note(secret: bytes | None, raw: bytes, key: str, nonces: Mapping[str, str]) -> dict | None:
    """The value of a note stored under `key`, or None when it is not one this job's nodes wrote: its writer's
    nonce (`nonces`, by node) unknown, its signature missing or wrong (checked before the body is parsed), or
    signed where the job has no secret."""
    head, _, body = raw.partition(b"\n")
    parts = head.split(b" ")
    if len(parts) != 3 or parts[0] != NOTE:
        return None
    writer, mac = parts[1].decode(errors="replace"), parts[2]
    if secret is None:
        ok = mac == UNSIGNED
    else:
        nonce = nonces.get(writer)
        ok = nonce is not None and mac != UNSIGNED and hmac.compare_digest(mac, _note_mac(secret, key, nonce, body))
    if not ok:
        return None
    try:
        value = json.loads(body)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def warn_open(node: int, store: str, listens: str = "every address") -> None:
    """Without a secret: the one line saying the store is open (torchrun's trust model); `listens`: where node 0's
    store listens (harness/launchers/nodes/meeting.store_address)."""
    print(
        f"warning: node {node}: no job secret, so the nodes' store at {store} (node 0, {listens}) takes "
        f"anyone who reaches it, and the cells it hands out start code on every node (torchrun's trust "
        f"model); give every node the same --secret-file or {SECRET_VAR}",
        file=sys.stderr,
        flush=True,
    )
