"""What a one-box sweep listens on is what README.md's "What listens" table says: the inet sockets in LISTEN of the
sweep's process tree, sampled on a thread while a 2-worker CPU cell runs, are each one of the table's kinds, bound
as it says; an undocumented listener (the driver or the zygote on a TCP port, a rank on every address) fails."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
from pathlib import Path

import psutil
import yaml

from helpers import ROOT, SMALL

WL = "bert-base-tiny"
LOOPBACK = {"127.0.0.1", "::1"}
STORE, PAIRS = "the cell's rendezvous store", "gloo / NCCL connections between ranks"
"""The table's kinds a one-box torch cell opens (the first cell of their rows in README.md)."""


def _documented_kinds() -> set[str]:
    section = (ROOT / "README.md").read_text().split("## What listens\n", 1)[1].split("\n## ", 1)[0]
    return {m.group(1) for m in re.finditer(r"^\| ([^|]+?) \|", section, re.M)} - {"listener", "---"}


def _rank_of(pid: int) -> int | None:
    """The rank a process is (its output is `rank<r>.log`, warm or cold alike), None for any other."""
    try:
        m = re.fullmatch(r"rank(\d+)\.log", Path(os.readlink(f"/proc/{pid}/fd/1")).name)
    except OSError:
        return None
    return int(m.group(1)) if m else None


def _sample(root: int, stop: threading.Event, seen: set) -> None:
    """Every LISTEN inet socket of `root`'s tree, as (pid, rank, address, port), until `stop`."""
    while not stop.wait(0.1):
        try:
            tree = {root} | {c.pid for c in psutil.Process(root).children(recursive=True)}
        except psutil.NoSuchProcess:
            return
        for c in psutil.net_connections(kind="inet"):
            if c.pid in tree and c.status == psutil.CONN_LISTEN:
                seen.add((c.pid, _rank_of(c.pid), c.laddr.ip, c.laddr.port))


def _kind(rank: int | None, ip: str) -> str:
    """The table's kind of a listener of a one-box cell, or why it is none."""
    if rank is None:
        return f"undocumented: a listener of the driver or its zygote on {ip} (the zygote is a Unix socket)"
    if ip not in LOOPBACK:
        return f"undocumented: rank {rank} listening on {ip or 'every address'}, not the rendezvous address"
    return STORE if rank == 0 else PAIRS  # rank 0's store and gloo pairs share the address; both documented


def test_a_one_box_sweep_listens_only_where_the_readme_says(tmp_path):
    assert {STORE, PAIRS} <= _documented_kinds(), _documented_kinds()
    sweep = tmp_path / "listen.yaml"
    sweep.write_text(
        yaml.safe_dump(
            {"name": "listen", "workloads": [WL], "schemes": ["ddp"], "workers": [2], "device": "cpu"}
            | {"baseline": False, "warmup": 2, "iters": 30, **SMALL[WL]}
        )
    )
    argv = [sys.executable, "-m", "harness.cli.main", "sweep", str(sweep), "--output", str(tmp_path / "run")]
    seen: set = set()
    stop = threading.Event()
    with subprocess.Popen([*argv, "--no-progress"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT) as p:
        sampler = threading.Thread(target=_sample, args=(p.pid, stop, seen), daemon=True)
        sampler.start()
        out = p.communicate(timeout=300)[0].decode()
        stop.set()
        sampler.join(timeout=10)
    assert p.returncode == 0, out[-3000:]
    kinds = {(rank, ip, port): _kind(rank, ip) for _, rank, ip, port in seen}
    assert not [f"{k}: {v}" for k, v in kinds.items() if v.startswith("undocumented")], kinds
    assert any(rank == 0 for rank, _, _ in kinds), f"no listener of rank 0 (its store) was seen: {kinds}"
